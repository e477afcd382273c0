/* skim.py in C: tagged_fields and array_count, a small interpreter over the programs skim._program encodes. */

#include "accel.h"

/* The program's operations, as skim._encode writes them (int32 each, an operation and its argument). */
enum { OP_RUN, OP_VARIABLE, OP_TAGS, OP_ARRAY_FIXED, OP_ARRAY, OP_ARRAY_CALL, OP_NULLABLE };
#define SHORT 1 /* IndexError, struct.error or Incomplete in the Python skipper: the body ends inside a field */

typedef struct {
    const unsigned char *b;
    int64_t len;
    int flexible;
} Body;

/* primitives.read_uvarint: a 32-bit value in at most 5 bytes; its ProtocolErrors. */
static int prim_uvarint(const unsigned char *b, int64_t len, int64_t *pos, int64_t *value) {
    int64_t p = *pos;
    if (p >= len) return PE_FORMAT("truncated varint at offset %lld", (long long)p), -1;
    unsigned char c = b[p];
    if (c < 0x80) {
        *value = c;
        *pos = p + 1;
        return 0;
    }
    int64_t v = c & 0x7F;
    int shift = 7;
    p += 1;
    for (;;) {
        if (shift > 28) return PE_FORMAT("varint longer than 5 bytes at offset %lld", (long long)p), -1;
        if (p >= len) return PE_FORMAT("truncated varint at offset %lld", (long long)p), -1;
        c = b[p++];
        v |= (int64_t)(c & 0x7F) << shift;
        if (c < 0x80) {
            if (v > 0xFFFFFFFFLL) {
                PyErr_SetString(ProtocolError, "varint exceeds 32 bits");
                return -1;
            }
            *value = v;
            *pos = p;
            return 0;
        }
        shift += 7;
    }
}

/* The generated skipper's length or count at pos (``width`` bytes when not flexible): 0, SHORT or -1. */
static int skim_length(Body *c, int64_t *pos, int width, int64_t *n) {
    if (c->flexible) {
        if (*pos >= c->len) return SHORT;
        int64_t v = (int64_t)c->b[*pos] - 1;
        if (v < 127) {
            *pos += 1;
            *n = v;
            return 0;
        }
        if (prim_uvarint(c->b, c->len, pos, &v) < 0) return -1;
        *n = v - 1;
        return 0;
    }
    if (*pos + width > c->len) return SHORT;
    *n = width == 2 ? be16(c->b + *pos) : be32(c->b + *pos);
    *pos += width;
    return 0;
}

static int skim(Body *c, const int32_t *op, const int32_t *stop, int64_t *pos) {
    int64_t n;
    int r;
    while (op < stop) {
        int32_t what = op[0], argument = op[1];
        op += 2;
        switch (what) {
        case OP_RUN:
            *pos += argument;
            break;
        case OP_VARIABLE:
            if ((r = skim_length(c, pos, argument, &n))) return r;
            if (n > 0)
                *pos += n;
            else if (n < -1)
                return PyErr_SetString(ProtocolError, "invalid length"), -1;
            break;
        case OP_TAGS:
            if (*pos >= c->len) return SHORT;
            if (c->b[*pos]) {
                int64_t at_least;
                if (skip_tagged(c->b, c->len, pos, 0, 0, &at_least) < 0) {
                    if (!PyErr_ExceptionMatches(Incomplete)) return -1;
                    PyErr_Clear();
                    return SHORT;
                }
            } else {
                *pos += 1;
            }
            break;
        case OP_NULLABLE:
            *pos += 1;
            if (*pos - 1 >= c->len) return SHORT;
            if (c->b[*pos - 1] < 128 && (r = skim(c, op, op + argument, pos))) return r;
            op += argument;
            break;
        default: /* the arrays */
            if ((r = skim_length(c, pos, 4, &n))) return r;
            if (n > 0) {
                if (n > c->len - *pos) return PyErr_SetString(ProtocolError, "array too long"), -1;
                if (what == OP_ARRAY_FIXED) {
                    *pos += n * argument;
                } else {
                    for (int64_t i = 0; i < n; i++) {
                        if ((r = skim(c, op, op + argument, pos))) return r;
                        if (what == OP_ARRAY_CALL && *pos > c->len)
                            return PyErr_SetString(ProtocolError, "fields run past the end"), -1;
                    }
                }
            } else if (n < -1) {
                return PyErr_SetString(ProtocolError, "invalid array length"), -1;
            }
            if (what != OP_ARRAY_FIXED) op += argument;
        }
    }
    return 0;
}

/* The program of a key, made by ``factory`` on the first call and kept in ``plans``: a borrowed (bytes, flexible). */
static PyObject *program(PyObject *plans, PyObject *factory, PyObject *key) {
    PyObject *plan = PyDict_GetItemWithError(plans, key);
    if (plan != NULL || PyErr_Occurred()) return plan;
    plan = PyObject_Call(factory, key, NULL);
    if (plan == NULL) return NULL;
    if (!PyTuple_Check(plan) || PyTuple_GET_SIZE(plan) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(plan, 0))) {
        Py_DECREF(plan);
        PyErr_SetString(PyExc_TypeError, "a skim program is (bytes, flexible)");
        return NULL;
    }
    int stored = PyDict_SetItem(plans, key, plan);
    Py_DECREF(plan);
    return stored < 0 ? NULL : plan; /* the dict holds it */
}

/* The program of the call's first ``keys`` arguments (the body follows them): a borrowed (bytes, flexible). */
static PyObject *plan_of(PyObject *plans, PyObject *factory, PyObject *const *args, Py_ssize_t nargs,
                         Py_ssize_t keys) {
    if (nargs != keys + 1) {
        PyErr_Format(PyExc_TypeError, "takes %zd arguments (%zd given)", keys + 1, nargs);
        return NULL;
    }
    PyObject *key = PyTuple_New(keys);
    if (key == NULL) return NULL;
    for (Py_ssize_t i = 0; i < keys; i++) PyTuple_SET_ITEM(key, i, Py_NewRef(args[i]));
    PyObject *plan = program(plans, factory, key);
    Py_DECREF(key);
    return plan;
}

/* Runs the plan's top-level skipper on body: 0 and *pos, SHORT, or -1 (error set). */
static int run_plan(PyObject *plan, Body *c, int64_t *pos) {
    PyObject *code = PyTuple_GET_ITEM(plan, 0);
    c->flexible = PyObject_IsTrue(PyTuple_GET_ITEM(plan, 1));
    const int32_t *op = (const int32_t *)PyBytes_AS_STRING(code);
    *pos = 0;
    int r = skim(c, op, op + PyBytes_GET_SIZE(code) / 4, pos);
    if (r) return r;
    if (*pos > c->len) return PyErr_SetString(ProtocolError, "fields run past the end"), -1;
    return 0;
}

PyObject *tagged_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    CONFIGURED(SkimProgram);
    PyObject *plan = plan_of(SkimPlans, SkimProgram, args, nargs, 3);
    if (plan == NULL) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[3], &view, PyBUF_SIMPLE) < 0) return NULL;
    Body c = {view.buf, view.len, 0};
    int64_t pos, end = view.len;
    PyObject *found = PyDict_New();
    int r = found == NULL ? -1 : run_plan(plan, &c, &pos);
    if (r == 0 && c.flexible) {
        if (pos < end && !c.b[pos]) {
            pos += 1;
        } else {
            int64_t count;
            if (prim_uvarint(c.b, end, &pos, &count) < 0) {
                r = -1;
            } else if (count > end - pos) {
                PE_FORMAT("%lld tagged fields in the %lld bytes left", (long long)count, (long long)(end - pos));
                r = -1;
            }
            for (int64_t i = 0; r == 0 && i < count; i++) {
                int64_t tag, size;
                if (prim_uvarint(c.b, end, &pos, &tag) < 0 || prim_uvarint(c.b, end, &pos, &size) < 0) {
                    r = -1;
                    break;
                }
                PyObject *k = PyLong_FromLongLong(tag), *span = Py_BuildValue("(LL)", (long long)pos,
                                                                              (long long)(pos + size));
                if (k == NULL || span == NULL || PyDict_SetItem(found, k, span) < 0) r = -1;
                Py_XDECREF(k);
                Py_XDECREF(span);
                pos += size;
                if (r == 0 && pos > end) {
                    PE_FORMAT("tagged field %lld of %lld bytes runs past the end (%lld)", (long long)tag,
                              (long long)size, (long long)end);
                    r = -1;
                }
            }
        }
    }
    PyBuffer_Release(&view);
    if (r == SHORT) PE_FORMAT("%S %S v%S ends inside a field", args[1], args[0], args[2]);
    else if (r == 0 && pos != end)
        PE_FORMAT("%S %S v%S: %lld bytes left after its fields", args[1], args[0], args[2], (long long)(end - pos));
    else if (r == 0)
        return found;
    Py_XDECREF(found);
    return NULL;
}

PyObject *array_count(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    CONFIGURED(PrefixProgram);
    PyObject *plan = plan_of(PrefixPlans, PrefixProgram, args, nargs, 4);
    if (plan == NULL) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[4], &view, PyBUF_SIMPLE) < 0) return NULL;
    Body c = {view.buf, view.len, 0};
    int64_t pos, count = 0;
    int r = run_plan(plan, &c, &pos);
    if (r == 0) {
        if (c.flexible) {
            if (prim_uvarint(c.b, c.len, &pos, &count) < 0) r = -1;
            count -= 1;
        } else if (pos + 4 > c.len) {
            r = SHORT;
        } else {
            count = be32(c.b + pos);
        }
    }
    PyBuffer_Release(&view);
    if (r == SHORT) return PE_FORMAT("%S %S v%S ends before its %S", args[1], args[0], args[2], args[3]);
    return r ? NULL : PyLong_FromLongLong(count);
}
