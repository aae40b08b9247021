from inventory.stock import reorder_list


def test_strictly_below_threshold():
    assert reorder_list({"bolts": 5, "nuts": 4}, 5) == ["nuts"]


def test_lowest_level_first_then_name():
    levels = {"washers": 1, "bolts": 3, "anchors": 1, "nuts": 9}
    assert reorder_list(levels, 4) == ["anchors", "washers", "bolts"]


def test_nothing_low():
    assert reorder_list({"bolts": 10}, 2) == []
