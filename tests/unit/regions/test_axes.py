"""Sizes as expressions over the var axes learned from two captures; the odd check shapes."""

from __future__ import annotations

from kernel_agent.regions.emit import check_shapes
from kernel_agent.regions.program import expr_text, express

AXES = [(2, 3), (16, 33)]  # batch and sequence in two labels


def test_a_size_equal_in_every_label_is_a_constant() -> None:
    assert express((64, 64), AXES) == (64, ())


def test_a_varying_size_is_an_axis_a_product_or_a_multiple() -> None:
    assert express((2, 3), AXES) == (1, (0,))
    assert express((32, 99), AXES) == (1, (0, 1))  # batch * seq (flattened tokens)
    assert express((6, 9), AXES) == (3, (0,))  # 3 indices per bag
    assert expr_text((3, (0,))) == "3*A0" and expr_text((1, (0, 1))) == "A0*A1"


def test_a_size_no_axis_explains_is_refused() -> None:
    assert express((5, 7), AXES) is None
    assert express((17, 34), AXES) is None  # seq + 1 is not a product


def test_check_shapes_hold_one_a_prime_and_one_past_a_power_of_two() -> None:
    assert check_shapes([(2, 16), (3, 33)]) == [(1, 1), (3, 5), (3, 9)]
    assert check_shapes([]) == []


def test_an_input_size_that_is_a_multiple_of_another_is_not_an_axis() -> None:
    from types import SimpleNamespace

    from kernel_agent.regions.program import find_axes

    def cap(*shapes: tuple[int, ...]) -> SimpleNamespace:
        values = {k: SimpleNamespace(shape=s) for k, s in enumerate(shapes)}
        return SimpleNamespace(values=values, user_inputs=list(values))

    # indices of 3 per bag, then offsets one per bag: the batch is the axis, 3 * batch is derived
    assert find_axes([cap((12,), (4,)), cap((21,), (7,))]) == [(4, 7)]
