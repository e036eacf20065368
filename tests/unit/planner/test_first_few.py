from kaiwo_planner.domain.state.first_few import first_few


def test_the_first_few_and_how_many_more():
    assert first_few(["a", "b"], shown=3) == "a, b"
    assert first_few(["a", "b", "c"], shown=3) == "a, b, c"
    assert first_few(["a", "b", "c", "d", "e"], shown=3) == "a, b, c and 2 more"
    assert (
        first_few(["a", "b", "c"], shown=2, separator="; ", and_more="; and ") == "a; b; and 1 more"
    )
