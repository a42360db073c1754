"""The training batch order: a pure function of (samples, batch size, seed, step)."""

from itertools import islice

from chess_sim.imitation.bc import batch_order


def test_each_epoch_is_a_permutation_cut_into_batches():
    batches = list(islice(batch_order(10, 4, seed=3, start_step=0), 6))
    assert [len(batch) for batch in batches] == [4, 4, 2, 4, 4, 2]
    assert sorted(sum(batches[:3], [])) == list(range(10)) == sorted(sum(batches[3:], []))
    assert sum(batches[:3], []) != sum(batches[3:], [])  # each epoch draws its own order


def test_starting_at_a_step_takes_the_batches_an_uninterrupted_run_would():
    whole = list(islice(batch_order(10, 4, seed=3, start_step=0), 9))
    for step in (1, 3, 5):
        assert list(islice(batch_order(10, 4, seed=3, start_step=step), 9 - step)) == whole[step:]


def test_the_seed_decides_the_order():
    assert list(islice(batch_order(50, 8, 1, 0), 7)) != list(islice(batch_order(50, 8, 2, 0), 7))
