"""How a failed loader is named: DataLoader's SIGCHLD handler raises a worker's death wherever this process happens to
be, and where that is inside Thread.start of a queue's feeder thread, threading's clean-up raises a KeyError naming
the thread instead, the death its context (seen in CI: 1 in ~30 fork loaders whose workers die at start, run by
hand 400 times under the CUDA emulation). Such a loader died; it did not raise a KeyError."""

from __future__ import annotations

import threading

from torch_upgrade_check.aspects.dataloader.run import _failure

DEATH = ("DataLoader worker (pid 4242) exited unexpectedly with exit code 1. Details are lost due to multiprocessing. "
         "Rerunning with num_workers=0 may give better error trace.")


def _raised_while_starting_a_thread(death: BaseException) -> BaseException:
    """`death` raised where Thread.start's clean-up then fails, chained as Python chains it (the KeyError's context)."""
    limbo: dict[threading.Thread, threading.Thread] = {}
    thread = threading.Thread(target=lambda: None, name="QueueFeederThread", daemon=True)
    try:
        try:
            raise death
        except Exception:
            del limbo[thread]  # the thread had already left threading's _limbo
    except KeyError as e:
        return e
    raise AssertionError("no KeyError")


def test_a_death_surfaced_as_a_keyerror_inside_thread_start_is_a_death_named_by_dataloaders_message() -> None:
    found = _failure(_raised_while_starting_a_thread(RuntimeError(DEATH)))
    assert found["outcome"] == "died", found
    assert found["error"].startswith("RuntimeError: DataLoader worker (pid 4242) exited unexpectedly"), found
    assert "(surfaced as KeyError: <Thread(QueueFeederThread" in found["error"], found


def test_a_death_raised_from_the_queues_error_and_one_killed_by_a_signal_are_deaths() -> None:
    try:
        try:
            raise ConnectionResetError("reset")
        except ConnectionResetError as e:
            raise RuntimeError("DataLoader worker (pid(s) 12, 13) exited unexpectedly") from e
    except RuntimeError as e:
        assert _failure(e) == {"outcome": "died", "error": "RuntimeError: DataLoader worker (pid(s) 12, 13) exited "
                                                            "unexpectedly (from ConnectionResetError: reset)"}
    killed = _failure(RuntimeError("DataLoader worker (pid 7) is killed by signal: Killed. "))
    assert killed["outcome"] == "died" and killed["error"].startswith("RuntimeError: DataLoader worker (pid 7) is killed")


def test_errors_with_no_death_in_their_chain_stay_raised_or_timed_out() -> None:
    """The A/A of the rule: a KeyError that surfaced nothing, a worker's own exception, a timeout keep their kind."""
    plain = _raised_while_starting_a_thread(ValueError("the dataset's own error"))
    assert _failure(plain)["outcome"] == "raised"
    assert _failure(plain)["error"].startswith("KeyError: <Thread(QueueFeederThread")
    wrapped = RuntimeError("Caught ValueError in DataLoader worker process 0.\nOriginal Traceback ...\nValueError: bad item")
    assert _failure(wrapped) == {"outcome": "raised",
                                 "error": "RuntimeError: Caught ValueError in DataLoader worker process 0. … "
                                          "ValueError: bad item"}
    assert _failure(RuntimeError("DataLoader timed out after 60.0 seconds"))["outcome"] == "timed out"
