"""URL slugs for article titles."""

import re


def slugify(title: str) -> str:
    """Lower-case `title` and join its runs of letters and digits with single dashes."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
