"""Scheduled (cron) tasks go to their own queue, so a worker without the schedule never takes
one it cannot run (issue 23: compose's plain workers run with an empty schedule)."""
import pytest

from netsurvey.jobs import QUEUE, SCHEDULE_QUEUE, SCHEDULE_TASK, TASK_NAME, ScheduleEntry, make_app

pytestmark = pytest.mark.unit   # no database, no CLI subprocess, no testbed, no root


def test_scheduled_tasks_have_their_own_queue():
    entry = ScheduleEntry(name="daily", cron="0 3 * * *", command=["scan", "tls", "--list", "x"], shards=2)
    app = make_app("postgresql://nobody@/nowhere", [entry])   # no connection is made here
    assert app.tasks[TASK_NAME].queue == QUEUE
    assert app.tasks[f"{SCHEDULE_TASK}.daily"].queue == SCHEDULE_QUEUE != QUEUE
    plain = make_app("postgresql://nobody@/nowhere", [])
    assert not any(name.startswith(SCHEDULE_TASK) for name in plain.tasks)
