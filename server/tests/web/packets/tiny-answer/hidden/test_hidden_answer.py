from answer import answer


def test_the_answer():
    assert answer() == 42
