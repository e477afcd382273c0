/* The writes gathered while one read is split: proxy.connection.write_batch.PureWriteBatch in C, doing the same at
 * every step (tests/proxy/connection/test_write_batch_native.py drives both with the same events and compares every
 * write either made). The core writes each frame through client() or broker(), several per read: as C methods they
 * are called from the request and response paths' C loops without a Python frame each. */

#include "connection.h"

typedef struct {
    PyObject_HEAD
    PyObject *to_client, *to_broker; /* lists while a batch is open (NULL: written at once) */
    PyObject *write_client, *write_broker, *send_client, *send_broker; /* NULL once closed: writes dropped */
} WriteBatch;

static int batch_init(WriteBatch *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"write_client", "write_broker", "send_client", "send_broker", NULL};
    PyObject *write_client, *write_broker, *send_client, *send_broker;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO", names, &write_client, &write_broker, &send_client,
                                     &send_broker))
        return -1;
    Py_CLEAR(self->to_client);
    Py_CLEAR(self->to_broker);
    Py_XSETREF(self->write_client, Py_NewRef(write_client));
    Py_XSETREF(self->write_broker, Py_NewRef(write_broker));
    Py_XSETREF(self->send_client, Py_NewRef(send_client));
    Py_XSETREF(self->send_broker, Py_NewRef(send_broker));
    return 0;
}

static int batch_traverse(WriteBatch *self, visitproc visit, void *arg) {
    Py_VISIT(self->to_client);
    Py_VISIT(self->to_broker);
    Py_VISIT(self->write_client);
    Py_VISIT(self->write_broker);
    Py_VISIT(self->send_client);
    Py_VISIT(self->send_broker);
    return 0;
}

static int batch_clear(WriteBatch *self) {
    Py_CLEAR(self->to_client);
    Py_CLEAR(self->to_broker);
    Py_CLEAR(self->write_client);
    Py_CLEAR(self->write_broker);
    Py_CLEAR(self->send_client);
    Py_CLEAR(self->send_broker);
    return 0;
}

static void batch_dealloc(WriteBatch *self) {
    PyObject_GC_UnTrack(self);
    batch_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* start(client): queue the writes to the broker (and to the client if client); False if already queueing */
static PyObject *batch_start(WriteBatch *self, PyObject *client) {
    if (self->to_broker != NULL) Py_RETURN_FALSE;
    int both = PyObject_IsTrue(client);
    if (both < 0) return NULL;
    if ((self->to_broker = PyList_New(0)) == NULL) return NULL;
    if (both && (self->to_client = PyList_New(0)) == NULL) {
        Py_CLEAR(self->to_broker); /* not started: writes go out at once, as before */
        return NULL;
    }
    Py_RETURN_TRUE;
}

/* one write to a side: queued while a batch is open, else written at once (dropped once closed) */
static PyObject *write_to(PyObject *queued, PyObject *write, PyObject *data) {
    if (queued != NULL) {
        if (PyList_Append(queued, data) < 0) return NULL;
        Py_RETURN_NONE;
    }
    if (write == NULL) Py_RETURN_NONE;
    return PyObject_CallOneArg(write, data);
}

static PyObject *batch_client(WriteBatch *self, PyObject *data) {
    return write_to(self->to_client, self->write_client, data);
}

static PyObject *batch_broker(WriteBatch *self, PyObject *data) {
    return write_to(self->to_broker, self->write_broker, data);
}

/* what one side's batch holds sent: a single frame as one write, several as one send, with the batch's callables
 * of that moment, as the pure one reads them (an earlier write's event may have closed it: dropped); 0, or -1 */
static int send_side(PyObject *queued, PyObject *write, PyObject *send) {
    Py_ssize_t n = PyList_GET_SIZE(queued);
    if (n == 0 || write == NULL) return 0;
    PyObject *callable = Py_NewRef(n == 1 ? write : send); /* held: the call may close the batch */
    PyObject *result = PyObject_CallOneArg(callable, n == 1 ? PyList_GET_ITEM(queued, 0) : queued);
    Py_DECREF(callable);
    return done(result);
}

/* send(): what was queued sent, the broker's first; writes go out at once again until the next start (so a write
 * made while these go out, by an event they cause, does too) */
static PyObject *batch_send(WriteBatch *self, PyObject *unused) {
    PyObject *to_client = self->to_client, *to_broker = self->to_broker;
    self->to_client = self->to_broker = NULL; /* owned here now */
    int failed = to_broker != NULL && send_side(to_broker, self->write_broker, self->send_broker) < 0;
    if (!failed && to_client != NULL) failed = send_side(to_client, self->write_client, self->send_client) < 0;
    Py_XDECREF(to_client);
    Py_XDECREF(to_broker);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

/* route(client, write, send): a side's callables from now on (nothing once closed) */
static PyObject *batch_route(WriteBatch *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "route() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (self->write_client == NULL) Py_RETURN_NONE;
    int client = PyObject_IsTrue(args[0]);
    if (client < 0) return NULL;
    if (client) {
        Py_XSETREF(self->write_client, Py_NewRef(args[1]));
        Py_XSETREF(self->send_client, Py_NewRef(args[2]));
    } else {
        Py_XSETREF(self->write_broker, Py_NewRef(args[1]));
        Py_XSETREF(self->send_broker, Py_NewRef(args[2]));
    }
    Py_RETURN_NONE;
}

/* close(): the connection closed, what was queued sent: the references back to it dropped, and any later write */
static PyObject *batch_close_method(WriteBatch *self, PyObject *unused) {
    batch_clear(self);
    Py_RETURN_NONE;
}

static PyMethodDef batch_methods[] = {
    {"start", (PyCFunction)batch_start, METH_O, "queue the writes (to the client too if client); False if already"},
    {"client", (PyCFunction)batch_client, METH_O, "a write to the client: queued, or written at once"},
    {"broker", (PyCFunction)batch_broker, METH_O, "a write to the broker: queued, or written at once"},
    {"send", (PyCFunction)batch_send, METH_NOARGS, "what was queued sent, the broker's first"},
    {"route", (PyCFunction)(void (*)(void))batch_route, METH_FASTCALL, "a side's write and send from now on"},
    {"close", (PyCFunction)batch_close_method, METH_NOARGS, "every later write dropped, the references let go"},
    {NULL},
};

PyTypeObject WriteBatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "proxy.connection._native.WriteBatch",
    .tp_basicsize = sizeof(WriteBatch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "the writes to each side of one connection, queued while a read is split (PureWriteBatch's twin)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)batch_init,
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_traverse = (traverseproc)batch_traverse,
    .tp_clear = (inquiry)batch_clear,
    .tp_methods = batch_methods,
};
