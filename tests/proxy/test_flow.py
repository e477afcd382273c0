"""The read gate: reading resumes only when every reason to pause is gone; mutes extend, never shorten."""

import asyncio


class FakeTransport:
    def __init__(self):
        self.reading = True
        self.calls = []

    def pause_reading(self):
        self.reading = False
        self.calls.append("pause")

    def resume_reading(self):
        self.reading = True
        self.calls.append("resume")

    def is_closing(self):
        return False


def test_reading_resumes_only_when_all_reasons_are_lifted():
    from proxy.flow import BACKPRESSURE, THROTTLED, ReadGate

    t = FakeTransport()
    resumed = []
    gate = ReadGate(t, on_resume=lambda: resumed.append(True))
    gate.pause(BACKPRESSURE)
    gate.pause(THROTTLED)
    gate.resume(BACKPRESSURE)
    assert not t.reading and not resumed
    gate.resume(THROTTLED)
    assert t.reading and resumed == [True]
    assert t.calls == ["pause", "resume"]


def test_mute_keeps_the_longer_of_two_mutes():
    from proxy.flow import ReadGate

    async def run():
        loop = asyncio.get_running_loop()
        t = FakeTransport()
        gate = ReadGate(t)
        gate.mute(loop, 200)
        gate.mute(loop, 50)  # shorter: the 200 ms mute stands
        await asyncio.sleep(0.1)
        assert not t.reading
        await asyncio.sleep(0.2)
        assert t.reading

    asyncio.run(run())


def test_on_resume_may_pause_again():
    from proxy.flow import MUTED, THROTTLED, ReadGate

    t = FakeTransport()
    gate = ReadGate(t, on_resume=lambda: gate.pause(THROTTLED))  # a held request is throttled anew
    gate.pause(MUTED)
    gate.resume(MUTED)
    assert not t.reading
