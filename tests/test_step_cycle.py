"""advisor.step_cycle: which optimizer step ends a training step, from the order they step in."""
from advisor.step_cycle import MAX_CYCLE, StepCycle


def feed(cycle: StepCycle, keys, built: int = 2) -> list:
    return [cycle.ends(key, built) for key in keys]


def test_one_optimizer_ends_every_step():
    assert feed(StepCycle(), [1] * 5, built=1) == [True] * 5


def test_a_gan_ends_its_step_at_the_generator_once_the_order_is_known():
    """The discriminator (1) steps, then the generator (2): the first loop iteration, before the
    order is known, ends at both; then only the generator's step ends one."""
    assert feed(StepCycle(), [1, 2, 1, 2, 1, 2, 1, 2]) == [True, True, False, True, False, True, False, True]


def test_two_optimizers_of_one_model_end_at_the_second():
    assert feed(StepCycle(), [1, 2, 3] * 3, built=3) == [True, True, True] + [False, False, True] * 2


def test_optimizers_built_anew_start_a_new_cycle():
    """A GAN whose optimizers are built again each epoch: the new ones' order is learned anew."""
    cycle = StepCycle()
    assert feed(cycle, [1, 2, 1, 2], built=2) == [True, True, False, True]
    assert feed(cycle, [3, 4, 3, 4, 3, 4], built=4) == [True, True, False, True, False, True]


def test_an_order_departing_from_the_cycle_ends_every_step_from_then_on():
    """A discriminator stepped twice for each generator step: the cycle learned first (the
    discriminator alone) breaks at the generator's step, an optimizer built before it was
    learned; from then on every step ends one, as with no cycle at all."""
    cycle = StepCycle()
    assert feed(cycle, [1, 1, 2, 1, 1, 2, 1, 2]) == [True] * 8
    assert cycle.every_step


def test_a_sequence_that_never_repeats_keeps_ending_every_step():
    """A new optimizer for every step (built each time): no cycle; the learned prefix is capped."""
    cycle = StepCycle()
    assert all(cycle.ends(key, key) for key in range(3 * MAX_CYCLE))
    assert cycle.cycle is None and len(cycle.learning) <= MAX_CYCLE
