"""The body view the connection's C hands to a plan's decide and a response's leg (connection.h's view_from) against
``memoryview(frame)[start:]``, which the pure paths make: frames of bytes, a bytearray, a memoryview, a slice of one,
read-only and writable, a strided and a two-dimensional view, starts before, inside and past the frame; the same
bytes, length, shape, strides, format, flags and exporter, and the frame held while the view lives and let go with
it. Skipped where the extension is not built."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quota.primitives.compiled import load_compiled

native, _ = load_compiled("proxy.connection._native")
if native is None:
    pytest.skip("the C extension is not built here (or the pure path is chosen)", allow_module_level=True)


def described(view: memoryview) -> tuple:
    return (
        view.tobytes(),
        len(view),
        view.nbytes,
        view.shape,
        view.strides,
        view.format,
        view.itemsize,
        view.ndim,
        view.readonly,
        view.c_contiguous,
        view.f_contiguous,
        view.contiguous,
        type(view.obj),
        view.tolist(),
    )


def frames(raw: bytes) -> list:
    writable = bytearray(raw)
    return [
        raw,
        writable,
        memoryview(raw),
        memoryview(writable),
        memoryview(raw)[1:],
        memoryview(writable)[::2],  # strided: through the slice
        memoryview(raw).cast("B", (len(raw) // 2, 2)) if len(raw) % 2 == 0 and raw else memoryview(raw),
    ]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), st.integers(-50, 50))
def test_the_view_is_the_slice_the_pure_path_makes(raw, start):
    for frame in frames(raw):
        try:
            expected = memoryview(frame)[start:]
        except (TypeError, NotImplementedError) as exc:  # a two-dimensional view is not sliced so either
            with pytest.raises(type(exc)):
                native.view_probe(frame, start)
            continue
        got = native.view_probe(frame, start)
        assert described(got) == described(expected)
        assert got.obj is expected.obj
        assert got[start:].tobytes() == expected[start:].tobytes() and bytes(got[::-1]) == bytes(expected[::-1])


def test_the_frame_is_held_while_the_view_lives_and_let_go_after():
    frame = bytearray(b"header-body")
    view = native.view_probe(frame, 7)
    assert bytes(view) == b"body"
    with pytest.raises(BufferError):
        frame.extend(b"more")  # exported: a bytearray cannot move while a view points into it
    part = view[1:]
    del view
    gc.collect()
    with pytest.raises(BufferError):
        frame.extend(b"more")  # a slice of the view still holds it
    del part
    frame.extend(b"more")
    assert frame == bytearray(b"header-bodymore")


def test_a_writable_frame_is_written_through_the_view():
    frame = bytearray(b"0123456789")
    view = native.view_probe(frame, 4)
    view[0] = ord("x")
    assert frame == bytearray(b"0123x56789")
