"""The episode scheduler against an in-process fake of VecChessEnv: every scene runs once to its end, the
simulator groups take turns (one policy batch per group), the schedule is reproducible, restarts are forgotten,
filmed scenes ask for frames at their reset."""

from collections import deque

import pytest

from chess_sim.scheduler import drive, groups_of
from chess_sim.sim.vec_env import StepResult


class FakeVec:
    """Simulators whose episode of scene i lasts 1 + i % 3 chunks; `die` = {(env, call): True} makes that
    simulator's answer to its call-th command a restarted episode."""

    def __init__(self, n: int, processes: int, die=()):
        self.n, self.processes = n, processes
        self.scene = {}
        self.chunks = {}
        self.calls = {env: 0 for env in range(n)}
        self.die = set(die)
        self.log = []
        self.queue = deque()
        self.queue_log = []
        self.reset_options = {}

    def submit(self, commands):
        self.log.append(("submit", sorted(commands)))
        self.queue.append(commands)
        self.queue_log.append(commands)
        return commands

    def collect(self, ticket):
        assert self.queue.popleft() is ticket, "collected out of order"
        answers = {}
        for env, (command, payload) in ticket.items():
            self.calls[env] += 1
            if command == "reset":
                seed, index, options = payload
                self.scene[env], self.chunks[env] = index, 0
                self.reset_options[index] = options
                answers[env] = ({"env": env}, {"index": index})
            elif (env, self.calls[env]) in self.die:
                self.chunks[env] = 0
                answers[env] = StepResult({}, 0.0, False, False, {"index": self.scene[env], "restarted": True})
            else:
                self.chunks[env] += 1
                done = self.chunks[env] == 1 + self.scene[env] % 3
                result = StepResult({}, 1.0, done, False, {"index": self.scene[env]})
                _, _, then = payload
                if done and then is not None:
                    seed, index, options = then
                    self.scene[env], self.chunks[env] = index, 0
                    self.reset_options[index] = options
                    result = result._replace(next_episode=({"env": env}, {"index": index}))
                answers[env] = result
        return answers


class Recorder:
    def __init__(self, films=()):
        self.batches, self.finished, self.forgotten, self.films = [], [], [], set(films)

    def start(self, index, observation, info):
        return {"index": index, "chunks": 0}

    def decide(self, episodes):
        self.batches.append(sorted(episodes))
        return {worker: [[0.0] * 6] for worker in episodes}

    def step(self, episode, result):
        episode["chunks"] += 1
        if result.terminated:
            self.finished.append((episode["index"], episode["chunks"]))
        return result.terminated

    def forget(self, episode):
        self.forgotten.append(episode["index"])

    def filmed(self, index):
        return index in self.films


def test_groups_hold_simulators_of_every_process():
    assert groups_of(FakeVec(8, 2), 2) == [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert groups_of(FakeVec(5, 2), 2) == [[0, 1, 4], [2, 3]]
    assert groups_of(FakeVec(2, 2), 2) == [[0, 1]]  # too few simulators for a second group
    assert groups_of(FakeVec(6, 2), 1) == [[0, 1, 2, 3, 4, 5]]


def test_every_scene_runs_once_to_its_end_and_groups_take_turns():
    vec, driver = FakeVec(8, 2), Recorder()
    clock = {}
    drive(vec, 1, list(range(20)), driver, clock=clock)
    assert sorted(driver.finished) == [(i, 1 + i % 3) for i in range(20)]
    members = groups_of(vec, 2)
    for batch in driver.batches:  # one policy batch never mixes the groups
        assert set(batch) <= set(members[0]) or set(batch) <= set(members[1])
    first_group = [set(batch) <= set(members[0]) for batch in driver.batches]
    assert first_group[:4] == [True, False, True, False]  # the groups alternate while both are busy
    assert clock["rounds"] == len(vec.log) and clock["decide"] >= 0


def test_an_episode_that_ends_goes_on_with_a_reserved_scene_without_a_turn_of_its_own():
    vec, driver = FakeVec(4, 2), Recorder()
    drive(vec, 1, list(range(30)), driver)
    assert sorted(driver.finished) == [(i, 1 + i % 3) for i in range(30)]
    assert sorted(vec.reset_options) == list(range(30))  # every scene started once
    resets_alone = [env for commands in vec.queue_log for env, (command, _) in commands.items() if command == "reset"]
    # the simulators' first scenes, and near the end one whose queue was empty while the other group held the
    # last scenes in reserve; the other 26 scenes follow a chunk
    assert resets_alone[:4] == [0, 1, 2, 3] and len(resets_alone) <= 6
    sizes = [len(batch) for batch in driver.batches]
    assert sizes == sorted(sizes, reverse=True) and sizes[:20] == [2] * 20  # full policy batches until the end


def test_the_schedule_depends_only_on_the_episodes():
    runs = []
    for _ in range(2):
        vec, driver = FakeVec(6, 2), Recorder()
        drive(vec, 1, list(range(15)), driver)
        runs.append((vec.log, driver.batches, driver.finished))
    assert runs[0] == runs[1]


def test_a_restarted_episode_is_forgotten_and_run_again():
    vec, driver = FakeVec(4, 2, die={(0, 2)}), Recorder()  # simulator 0 dies on its first chunk
    drive(vec, 1, list(range(6)), driver)
    assert driver.forgotten == [0]
    assert sorted(driver.finished) == [(i, 1 + i % 3) for i in range(6)]


@pytest.mark.parametrize("groups", [1, 2, 3])
def test_any_group_count_finishes_everything(groups):
    vec, driver = FakeVec(6, 2), Recorder()
    drive(vec, 1, list(range(11)), driver, groups=groups)
    assert sorted(index for index, _ in driver.finished) == list(range(11))


def test_filmed_scenes_ask_for_frames_at_their_reset():
    vec, driver = FakeVec(2, 2), Recorder(films={1})
    drive(vec, 1, [0, 1, 2], driver, options={"check_expert": True})
    assert vec.reset_options[1] == {"check_expert": True, "film": True}
    assert vec.reset_options[0] == vec.reset_options[2] == {"check_expert": True}


class Acting(FakeVec):
    """FakeVec whose simulators also answer `act` (as a step) and whose processes take an actor."""

    hosts_actors = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.actors = []

    def envs_of(self, worker):
        return list(range(worker, self.n, self.processes))

    def set_actor(self, actor):
        assert not self.queue, "an actor is given while nothing is in flight"
        self.actors.append(actor)


class RemoteRecorder(Recorder):
    """Decides in the simulators' processes: hands out draws, never decides here."""

    def __init__(self):
        super().__init__()
        self.drawn = []

    def actor(self):
        return "the policy"

    def draws(self, episodes):
        self.drawn.append(sorted(episodes))
        return {worker: ("draw", worker) for worker in episodes}


def test_a_driver_with_an_actor_has_each_process_decide_for_its_own_simulators():
    vec, driver = Acting(8, 2), RemoteRecorder()
    drive(vec, 1, list(range(20)), driver)
    assert vec.actors == ["the policy"] and driver.batches == []  # nothing decided here
    assert sorted(driver.finished) == [(i, 1 + i % 3) for i in range(20)]
    processes = [set(vec.envs_of(0)), set(vec.envs_of(1))]
    assert all(set(batch) in processes for batch in driver.drawn[:4])  # whole processes while scenes remain
    assert all(set(batch) <= processes[0] or set(batch) <= processes[1] for batch in driver.drawn)
    steps = [(command, payload[0]) for commands in vec.queue_log for env, (command, payload) in commands.items()
             if command != "reset"]
    assert steps and all(command == "act" and payload[0] == "draw" for command, payload in steps)


def test_simulators_that_host_no_actor_leave_the_deciding_here():
    vec, driver = FakeVec(8, 2), RemoteRecorder()  # as the Ray backend: one simulator per actor
    drive(vec, 1, list(range(20)), driver)
    assert driver.drawn == [] and driver.batches and sorted(driver.finished) == [(i, 1 + i % 3) for i in range(20)]
