//! Pages of this area.
