//! One module per area of the site.
