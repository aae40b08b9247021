"""Stock levels for the warehouse dashboard."""


def reorder_list(levels: dict[str, int], threshold: int) -> list[str]:
    """Items whose level is below `threshold`, lowest level first, ties by name."""
    low = [item for item, level in levels.items() if level <= threshold]
    return sorted(low)
