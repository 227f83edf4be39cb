"""store.keys: every key in one place, and names checked before they become part of one."""

from __future__ import annotations

import pytest

from store.keys import BadName, InboxKeys, JobKeys, check_name, new_job_id


def test_job_keys_and_inbox_keys():
    assert JobKeys("abc").meta == "tq:job:abc"
    assert JobKeys("abc").results == "tq:job:abc:results"
    assert InboxKeys("docs").lock == "tq:inbox:docs:lock"
    assert InboxKeys("docs").invalid == "tq:inbox:docs:invalid"
    assert InboxKeys("docs").refused == "tq:inbox:docs:refused"
    assert check_name(new_job_id()) and len(new_job_id()) == 12


@pytest.mark.parametrize("name", ["abc:docs", "", "a" * 65, "../x", "a b", "é", 7, None, ["a"]])
def test_a_name_that_could_address_another_key_is_refused(name):
    with pytest.raises(BadName, match="is not valid"):
        JobKeys(name)
    with pytest.raises(BadName, match="inbox name"):
        InboxKeys(name)
