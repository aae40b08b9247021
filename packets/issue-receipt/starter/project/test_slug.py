from project.slug import slugify


def test_plain_title():
    assert slugify("Hello World") == "hello-world"


def test_punctuation_at_the_edges_leaves_no_dashes():
    assert slugify("  Hello, World! ") == "hello-world"
    assert slugify("--Already--slugged--") == "already-slugged"


def test_only_punctuation_gives_empty_slug():
    assert slugify("?!") == ""
