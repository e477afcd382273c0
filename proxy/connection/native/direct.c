/* DirectWrite: a plain uvloop TCP transport's write and writelines, sent on its socket directly while the transport
 * holds nothing unsent. uvloop's own write costs about 2,700 instructions (its buffer list, a memoryview of the
 * data, a try-write); a send() here about 500 with the checks below. Whatever the socket does not take at once (a
 * partial send, EAGAIN, an error) goes to the transport's own write, which buffers it, or meets the same error and
 * closes the connection as it always did. Order holds: a direct send happens only while the transport's buffer and
 * libuv's queue are empty (get_write_buffer_size() 0), so nothing given to the transport earlier is still waiting,
 * and whatever waits after a partial send makes every later write go through the transport too.
 *
 * Nothing is sent directly once the transport is closing (its socket may be closed and its number reused) nor after
 * write_eof() through this object (libuv shuts the socket down on a later turn of the loop; until then a send would
 * pass where the transport's write raises). proxy/connection/writer.py chooses it for uvloop's TCPTransport only (not
 * a TLS transport, whose socket carries records); everywhere else the transport's own methods are used. */

#include <errno.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "connection.h"

#define DIRECT_IOV_MAX 64 /* frames sent in one sendmsg; more go through the transport */

typedef struct {
    PyObject_HEAD
    PyObject *transport, *write, *writelines, *is_closing, *buffer_size, *write_eof; /* the transport's methods */
    int fd;
    int stopped; /* write_eof() called: everything through the transport from now on */
} DirectWrite;

static int direct_init(DirectWrite *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"transport", "fd", NULL};
    PyObject *transport;
    int fd;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oi", names, &transport, &fd)) return -1;
    const char *methods[] = {"write", "writelines", "is_closing", "get_write_buffer_size", "write_eof"};
    PyObject **slots[] = {&self->write, &self->writelines, &self->is_closing, &self->buffer_size, &self->write_eof};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        PyObject *method = PyObject_GetAttrString(transport, methods[i]);
        if (method == NULL) return -1;
        Py_XSETREF(*slots[i], method);
    }
    Py_XSETREF(self->transport, Py_NewRef(transport));
    self->fd = fd;
    self->stopped = 0;
    return 0;
}

static int direct_traverse(DirectWrite *self, visitproc visit, void *arg) {
    Py_VISIT(self->transport);
    Py_VISIT(self->write);
    Py_VISIT(self->writelines);
    Py_VISIT(self->is_closing);
    Py_VISIT(self->buffer_size);
    Py_VISIT(self->write_eof);
    return 0;
}

static int direct_clear(DirectWrite *self) {
    Py_CLEAR(self->transport);
    Py_CLEAR(self->write);
    Py_CLEAR(self->writelines);
    Py_CLEAR(self->is_closing);
    Py_CLEAR(self->buffer_size);
    Py_CLEAR(self->write_eof);
    return 0;
}

static void direct_dealloc(DirectWrite *self) {
    PyObject_GC_UnTrack(self);
    direct_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* 1 when a send may go on the socket now: the transport is not closing and holds nothing unsent; 0; -1 (error set) */
static int idle(DirectWrite *self) {
    if (self->stopped || self->write == NULL) return 0;
    PyObject *closing = PyObject_CallNoArgs(self->is_closing);
    if (closing == NULL) return -1;
    int is_closing = closing == Py_False ? 0 : closing == Py_True ? 1 : PyObject_IsTrue(closing);
    Py_DECREF(closing);
    if (is_closing != 0) return is_closing < 0 ? -1 : 0;
    PyObject *size = PyObject_CallNoArgs(self->buffer_size);
    if (size == NULL) return -1;
    Py_ssize_t waiting = PyLong_AsSsize_t(size);
    Py_DECREF(size);
    if (waiting == -1 && PyErr_Occurred()) return -1;
    return waiting == 0;
}

/* what send() took of len bytes: len, fewer, or 0 (EAGAIN, EINTR, an error: the transport meets it itself) */
static Py_ssize_t sent_of(ssize_t n) {
    return n < 0 ? 0 : (Py_ssize_t)n;
}

static PyObject *direct_write(DirectWrite *self, PyObject *data) {
    int now = idle(self);
    if (now < 0) return NULL;
    if (now) {
        Py_buffer view;
        if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) { /* not bytes-like: the transport says so */
            PyErr_Clear();
            return PyObject_CallOneArg(self->write, data);
        }
        if (view.len == 0) { /* the transport ignores an empty write, as this does */
            PyBuffer_Release(&view);
            Py_RETURN_NONE;
        }
        Py_ssize_t sent = sent_of(send(self->fd, view.buf, (size_t)view.len, MSG_DONTWAIT | MSG_NOSIGNAL));
        if (sent == view.len) {
            PyBuffer_Release(&view);
            Py_RETURN_NONE;
        }
        if (sent > 0) { /* the rest, copied (the caller's buffer may change once this returns), to the transport */
            PyObject *rest = PyBytes_FromStringAndSize((const char *)view.buf + sent, view.len - sent);
            PyBuffer_Release(&view);
            if (rest == NULL) return NULL;
            PyObject *result = PyObject_CallOneArg(self->write, rest);
            Py_DECREF(rest);
            return result;
        }
        PyBuffer_Release(&view);
    }
    if (self->write == NULL) return PyErr_Format(PyExc_RuntimeError, "DirectWrite not initialised");
    return PyObject_CallOneArg(self->write, data);
}

/* writelines(frames): up to DIRECT_IOV_MAX buffers in one sendmsg; what it did not take, to the transport */
static PyObject *direct_writelines(DirectWrite *self, PyObject *frames) {
    int now = idle(self);
    if (now < 0) return NULL;
    if (!now || !PyList_CheckExact(frames) || PyList_GET_SIZE(frames) > DIRECT_IOV_MAX) {
        if (self->writelines == NULL) return PyErr_Format(PyExc_RuntimeError, "DirectWrite not initialised");
        return PyObject_CallOneArg(self->writelines, frames);
    }
    Py_ssize_t n = PyList_GET_SIZE(frames), got = 0, total = 0;
    Py_buffer views[DIRECT_IOV_MAX];
    struct iovec iov[DIRECT_IOV_MAX];
    PyObject *items = PyList_GetSlice(frames, 0, n); /* held: a buffer's release may run code that changes the list */
    if (items == NULL) return NULL;
    PyObject *result = NULL;
    for (; got < n; got++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(items, got), &views[got], PyBUF_SIMPLE) < 0) {
            PyErr_Clear(); /* not bytes-like: the transport says so, having written nothing of them */
            result = PyObject_CallOneArg(self->writelines, frames);
            goto out;
        }
        iov[got].iov_base = views[got].buf;
        iov[got].iov_len = (size_t)views[got].len;
        total += views[got].len;
    }
    struct msghdr message = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    Py_ssize_t sent = total == 0 ? 0 : sent_of(sendmsg(self->fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL));
    if (sent == total) {
        result = Py_NewRef(Py_None);
        goto out;
    }
    /* the rest: the first frame not wholly sent from where the send stopped (copied), and every frame after it */
    Py_ssize_t first = 0;
    while (first < n && sent >= views[first].len) sent -= views[first++].len;
    PyObject *rest = PyList_New(0);
    if (rest == NULL) goto out;
    for (Py_ssize_t i = first; i < n; i++) {
        PyObject *part = i == first && sent > 0
                             ? PyBytes_FromStringAndSize((const char *)views[i].buf + sent, views[i].len - sent)
                             : Py_NewRef(PyList_GET_ITEM(items, i));
        if (part == NULL || PyList_Append(rest, part) < 0) {
            Py_XDECREF(part);
            Py_DECREF(rest);
            goto out;
        }
        Py_DECREF(part);
    }
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    got = 0;
    result = PyObject_CallOneArg(self->writelines, rest);
    Py_DECREF(rest);
out:
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    Py_DECREF(items);
    return result;
}

/* write_eof(): the transport's, and every later write through it */
static PyObject *direct_write_eof(DirectWrite *self, PyObject *unused) {
    self->stopped = 1;
    if (self->write_eof == NULL) return PyErr_Format(PyExc_RuntimeError, "DirectWrite not initialised");
    return PyObject_CallNoArgs(self->write_eof);
}

static PyMethodDef direct_methods[] = {
    {"write", (PyCFunction)direct_write, METH_O, "the transport's write, sent on the socket while nothing waits"},
    {"writelines", (PyCFunction)direct_writelines, METH_O, "the transport's writelines, likewise"},
    {"write_eof", (PyCFunction)direct_write_eof, METH_NOARGS, "the transport's write_eof; every later write by it"},
    {NULL},
};

static PyMemberDef direct_members[] = {
    {"transport", T_OBJECT_EX, offsetof(DirectWrite, transport), READONLY, "the transport written to"},
    {"fd", T_INT, offsetof(DirectWrite, fd), READONLY, "its socket"},
    {NULL},
};

PyTypeObject DirectWriteType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "proxy.connection._native.DirectWrite",
    .tp_basicsize = sizeof(DirectWrite),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "a plain TCP transport's write and writelines, sent on its socket while it holds nothing unsent",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)direct_init,
    .tp_dealloc = (destructor)direct_dealloc,
    .tp_traverse = (traverseproc)direct_traverse,
    .tp_clear = (inquiry)direct_clear,
    .tp_methods = direct_methods,
    .tp_members = direct_members,
};
