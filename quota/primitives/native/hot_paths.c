/* quota.primitives._rate.HotPaths: quota.managers.hot_paths.PureHotPaths in C, the base of ClientQuotaManager where
 * the extension runs.
 *
 * Each method takes the common case itself and hands every other to the pure method of the same name
 * (configure_hot_paths), before changing anything: so both answer the same and leave every sensor the same
 * (tests/quota/managers/test_hot_paths_native.py). The common case is a client whose sensor SensorKeeper.known finds
 * by one lookup of its names (the table's shape by names, by client-id or by user; a quota group's member and a
 * table mixing the last two go to the pure method), smoothing off, no expiry due and no move of the sensor due, a
 * plain ClientSensors over the C rate, and times that are ints; usage shared with peers is told to the tap as the
 * pure method tells it.
 *
 * What it reads is where the pure class keeps it, read without a lookup by name (each is 80-100 instructions, as
 * much as the bytecode it replaces): the manager's attributes the methods read are this type's own fields (the pure
 * class's __slots__, set by the manager's __init__ either way); a SensorTable's and a ClientSensors' are their slots,
 * read at the offsets their classes' member descriptors give (configure_hot_paths), on objects of exactly those
 * classes (any other goes to the pure method); so are a SensorKeeper's two (its table and its shape). */

#include "rate.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *keeper, *clock, *smoothing, *tap, *quota_key; /* PureHotPaths.__slots__ */
} HotPathsObject;

/* A slot of a SensorTable or a ClientSensors (borrowed; NULL when unset) at the offset of its member descriptor. */
#define SLOT(o, offset) (*(PyObject **)((char *)(o) + (offset)))
static PyTypeObject *TableClass, *KeeperClass;
static Py_ssize_t K_table, K_known_by, T_sensors, T_due_ms, T_step_ms, C_fast, C_representative, C_tags, C_entity, C_moved_ms, C_rate,
    C_limit, C_value_total, C_last_record_ms;

static PyObject *PureRecord, *PureFloor, *Forward, *NoTap, *SensorsClass; /* configure_hot_paths */
static PyObject *S_now_ms, *S_decided, *S_add, *Empty;

enum { BY_NAMES, BY_CLIENT_ID, BY_USER }; /* quota.primitives.sensor_keeper's; BY_NOTHING and any other: pure */

/* The pure method, called as the twin was: self first. */
static PyObject *pure(PyObject *method, PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *stack[8];
    Py_ssize_t total = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    if (total > 7) {
        PyErr_SetString(PyExc_TypeError, "too many arguments");
        return NULL;
    }
    stack[0] = self;
    for (Py_ssize_t i = 0; i < total; i++) stack[i + 1] = args[i];
    return PyObject_Vectorcall(method, stack, nargs + 1, kwnames);
}

/* An exact int in range as a long long: 1 and *out, else 0 (never an exception). */
static int exact_ll(PyObject *v, long long *out) {
    if (v == NULL || !PyLong_CheckExact(v)) return 0;
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    return !overflow;
}

/* What SensorKeeper.known finds by one lookup of the client's names, as the table's shape looks it up, in a table of
 * exactly SensorTable: the sensor (borrowed) of exactly ClientSensors in *sensors, its table (borrowed: the keeper
 * holds it) in *table; NULL in *sensors when the one lookup does not find it so (the pure method looks further). 0,
 * or -1 with an exception set. */
static int known(HotPathsObject *self, PyObject *user, PyObject *client_id, PyObject **table, PyObject **sensors) {
    *table = *sensors = NULL;
    PyObject *keeper = self->keeper;
    if (keeper == NULL || Py_TYPE(keeper) != KeeperClass) return 0;
    PyObject *held = SLOT(keeper, K_table);
    long long by;
    if (held == NULL || !exact_ll(SLOT(keeper, K_known_by), &by) || (by != BY_NAMES && by != BY_CLIENT_ID && by != BY_USER))
        return 0;
    *table = held; /* borrowed: the keeper holds it */
    PyObject *by_tags = Py_TYPE(held) == TableClass ? SLOT(held, T_sensors) : NULL;
    if (by_tags == NULL || !PyDict_Check(by_tags)) return 0;
    PyObject *key = PyTuple_Pack(2, by == BY_CLIENT_ID ? Empty : user, by == BY_USER ? Empty : client_id);
    if (key == NULL) return -1;
    PyObject *found = PyDict_GetItemWithError(by_tags, key); /* borrowed */
    Py_DECREF(key);
    if (found == NULL) return PyErr_Occurred() ? -1 : 0;
    if (Py_TYPE(found) != (PyTypeObject *)SensorsClass) return 0;
    PyObject *fast = SLOT(found, C_fast), *entity = SLOT(found, C_entity);
    if (fast != Py_True || entity == NULL) return 0; /* fast is a bool: what is not True is false */
    if (by == BY_NAMES && SLOT(found, C_representative) != SLOT(found, C_tags)) return 0;
    if (by == BY_USER && entity == Py_None) return 0;
    *sensors = found;
    return 0;
}

/* The sensor's C rate and limit (borrowed) when it has a quota, else 0. */
static int c_rate(PyObject *sensors, RateObject **rate, PyObject **limit) {
    PyObject *r = SLOT(sensors, C_rate);
    *limit = SLOT(sensors, C_limit);
    if (SLOT(sensors, C_entity) == Py_None || r == NULL || *limit == NULL || !PyObject_TypeCheck(r, &RateType)) return 0;
    *rate = (RateObject *)r;
    return 1;
}

#define CONFIGURED                                                                                                 \
    if (PureRecord == NULL) {                                                                                      \
        PyErr_SetString(PyExc_RuntimeError, "HotPaths is used through quota.managers.hot_paths");                 \
        return NULL;                                                                                               \
    }

/* PureHotPaths.remaining_floor */
static PyObject *remaining_floor(HotPathsObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    CONFIGURED
    if (nargs != 2 || kwnames != NULL || self->smoothing != Py_False)
        return pure(PureFloor, (PyObject *)self, args, nargs, kwnames);
    PyObject *table, *sensors, *limit;
    RateObject *rate;
    if (known(self, args[0], args[1], &table, &sensors) < 0) return NULL;
    if (sensors == NULL || !c_rate(sensors, &rate, &limit))
        return pure(PureFloor, (PyObject *)self, args, nargs, kwnames);
    Py_INCREF(sensors); /* the floor may call into Python (an int limit) */
    PyObject *result = rate_headroom_floor(rate, limit);
    Py_DECREF(sensors);
    return result;
}

/* The common case of a record, once its time is known: 1 and *decision, 0 when it is not the common case (nothing
 * changed), -1 with an exception set. */
static int record_common(HotPathsObject *self, PyObject *user, PyObject *client_id, PyObject *value, PyObject *now,
                         PyObject **decision) {
    long long t, due, moved, step;
    PyObject *table, *sensors, *limit;
    RateObject *rate;
    if (self->smoothing != Py_False || self->tap == NULL || !exact_ll(now, &t)) return 0;
    if (known(self, user, client_id, &table, &sensors) < 0) return -1;
    if (sensors == NULL || !exact_ll(SLOT(table, T_due_ms), &due) || t > due) return 0; /* expiry due first */
    if (!exact_ll(SLOT(sensors, C_moved_ms), &moved) || !exact_ll(SLOT(table, T_step_ms), &step) || t - moved >= step)
        return 0; /* the sensor moved to the back of the table first */
    if (!c_rate(sensors, &rate, &limit)) return 0;
    PyObject *total = SLOT(sensors, C_value_total);
    if (total == NULL) return 0;
    Py_INCREF(sensors); /* held across what may run Python code (the additions, the tap) */
    Py_INCREF(rate);
    Py_INCREF(limit);
    Py_INCREF(total);
    int within, result = -1;
    /* sensors.record_within(value, now): the total, the last record, then the rate's record_within */
    PyObject *added = PyNumber_InPlaceAdd(total, value);
    Py_DECREF(total);
    if (added == NULL) goto out;
    Py_XSETREF(SLOT(sensors, C_value_total), added);
    Py_XSETREF(SLOT(sensors, C_last_record_ms), Py_NewRef(now));
    if (rate_record_within(rate, value, now, limit, &within) < 0) goto out;
    if (self->tap != NoTap) { /* told the value (it reads nothing of the rate) */
        PyObject *tags = SLOT(sensors, C_tags), *told = NULL;
        if (tags != NULL && self->quota_key != NULL)
            told = PyObject_CallMethodObjArgs(self->tap, S_add, self->quota_key, tags, user, client_id, value, limit,
                                              NULL);
        else
            PyErr_SetString(PyExc_AttributeError, "a sensor without tags, or a manager without its quota key");
        if (told == NULL) goto out;
        Py_DECREF(told);
    }
    *decision = within ? Py_NewRef(Forward) : PyObject_CallMethodObjArgs((PyObject *)self, S_decided, sensors, now, NULL);
    result = *decision == NULL ? -1 : 1;
out:
    Py_DECREF(limit);
    Py_DECREF(rate);
    Py_DECREF(sensors);
    return result;
}

/* PureHotPaths.record_and_decide */
static PyObject *record_and_decide(HotPathsObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    CONFIGURED
    if (nargs < 3 || nargs > 4 || kwnames != NULL || self->clock == NULL)
        return pure(PureRecord, (PyObject *)self, args, nargs, kwnames);
    PyObject *now, *decision = NULL;
    now = nargs == 4 && args[3] != Py_None ? Py_NewRef(args[3]) : PyObject_CallMethodNoArgs(self->clock, S_now_ms);
    if (now == NULL) return NULL;
    int common = record_common(self, args[0], args[1], args[2], now, &decision);
    if (common == 0) { /* the pure method, at the time read here (it reads the clock once, as this did) */
        PyObject *again[4] = {args[0], args[1], args[2], now};
        decision = pure(PureRecord, (PyObject *)self, again, 4, NULL);
    }
    Py_DECREF(now);
    return common < 0 ? NULL : decision;
}

static PyMethodDef hot_path_methods[] = {
    {"record_and_decide", (PyCFunction)(void (*)(void))record_and_decide, METH_FASTCALL | METH_KEYWORDS,
     "PureHotPaths.record_and_decide"},
    {"remaining_floor", (PyCFunction)(void (*)(void))remaining_floor, METH_FASTCALL | METH_KEYWORDS,
     "PureHotPaths.remaining_floor"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef hot_path_members[] = {
    {"keeper", T_OBJECT_EX, offsetof(HotPathsObject, keeper), 0, "the manager's SensorKeeper"},
    {"_clock", T_OBJECT_EX, offsetof(HotPathsObject, clock), 0, "the manager's clock"},
    {"smoothing", T_OBJECT_EX, offsetof(HotPathsObject, smoothing), 0, "quota.smoothing on"},
    {"tap", T_OBJECT_EX, offsetof(HotPathsObject, tap), 0, "where usage shared with peers is told"},
    {"quota_key", T_OBJECT_EX, offsetof(HotPathsObject, quota_key), 0, "the quota's key"},
    {NULL, 0, 0, 0, NULL},
};

static int HotPaths_traverse(HotPathsObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->keeper); /* (the class is the heap subclass's to visit: subtype_traverse does) */
    Py_VISIT(self->clock);
    Py_VISIT(self->smoothing);
    Py_VISIT(self->tap);
    Py_VISIT(self->quota_key);
    return 0;
}

static int HotPaths_clear(HotPathsObject *self) {
    Py_CLEAR(self->keeper);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->smoothing);
    Py_CLEAR(self->tap);
    Py_CLEAR(self->quota_key);
    return 0;
}

static void HotPaths_dealloc(HotPathsObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    HotPaths_clear(self);
    type->tp_free((PyObject *)self);
}

static PyTypeObject HotPathsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "quota.primitives._rate.HotPaths",
    .tp_basicsize = sizeof(HotPathsObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, /* the manager is a class over it */
    .tp_doc = "quota.managers.hot_paths.PureHotPaths in C: a byte-rate manager's per-request methods.",
    .tp_methods = hot_path_methods,
    .tp_members = hot_path_members,
    .tp_traverse = (traverseproc)HotPaths_traverse,
    .tp_clear = (inquiry)HotPaths_clear,
    .tp_dealloc = (destructor)HotPaths_dealloc,
    .tp_new = PyType_GenericNew,
};

/* The offset of the slot ``name`` of ``type`` (its member descriptor's), or -1 with an exception set. */
static Py_ssize_t slot_offset(PyObject *type, const char *name) {
    PyObject *descr = PyDict_GetItemString(((PyTypeObject *)type)->tp_dict, name); /* borrowed */
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)descr)->d_member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "configure_hot_paths: %s.%s is not a slot", ((PyTypeObject *)type)->tp_name, name);
        return -1;
    }
    return ((PyMemberDescrObject *)descr)->d_member->offset;
}

/* configure_hot_paths(pure record_and_decide, pure remaining_floor, FORWARD, NO_TAP, ClientSensors, SensorTable,
 * SensorKeeper) */
static PyObject *configure_hot_paths(PyObject *module, PyObject *args) {
    PyObject *record, *floor, *forward, *no_tap, *sensors_class, *table_class, *keeper_class;
    if (!PyArg_ParseTuple(args, "OOOOO!O!O!", &record, &floor, &forward, &no_tap, &PyType_Type, &sensors_class,
                          &PyType_Type, &table_class, &PyType_Type, &keeper_class))
        return NULL;
    struct {
        Py_ssize_t *offset;
        PyObject *type;
        const char *name;
    } slots[] = {
        {&K_table, keeper_class, "table"},
        {&K_known_by, keeper_class, "_known_by"},
        {&T_sensors, table_class, "sensors"},
        {&T_due_ms, table_class, "due_ms"},
        {&T_step_ms, table_class, "step_ms"},
        {&C_fast, sensors_class, "fast"},
        {&C_representative, sensors_class, "representative"},
        {&C_tags, sensors_class, "tags"},
        {&C_entity, sensors_class, "entity"},
        {&C_moved_ms, sensors_class, "moved_ms"},
        {&C_rate, sensors_class, "rate"},
        {&C_limit, sensors_class, "limit"},
        {&C_value_total, sensors_class, "value_total"},
        {&C_last_record_ms, sensors_class, "last_record_ms"},
    };
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++)
        if ((*slots[i].offset = slot_offset(slots[i].type, slots[i].name)) < 0) return NULL;
    Py_XSETREF(PureRecord, Py_NewRef(record));
    Py_XSETREF(PureFloor, Py_NewRef(floor));
    Py_XSETREF(Forward, Py_NewRef(forward));
    Py_XSETREF(NoTap, Py_NewRef(no_tap));
    Py_XSETREF(SensorsClass, Py_NewRef(sensors_class));
    Py_XSETREF(TableClass, (PyTypeObject *)Py_NewRef(table_class));
    Py_XSETREF(KeeperClass, (PyTypeObject *)Py_NewRef(keeper_class));
    Py_RETURN_NONE;
}

static PyMethodDef configure_def = {"configure_hot_paths", configure_hot_paths, METH_VARARGS,
                                    "the pure methods and the objects HotPaths compares with (quota.managers.hot_paths)"};

int add_hot_paths(PyObject *module) {
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {
        {&S_now_ms, "now_ms"},
        {&S_decided, "decided"}, {&S_add, "add"}, {&Empty, ""},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].name);
        if (*names[i].slot == NULL) return -1;
    }
    if (PyType_Ready(&HotPathsType) < 0) return -1;
    PyObject *configure = PyCFunction_NewEx(&configure_def, NULL, NULL);
    if (configure == NULL || PyModule_AddObject(module, "configure_hot_paths", configure) < 0) {
        Py_XDECREF(configure);
        return -1;
    }
    Py_INCREF(&HotPathsType);
    if (PyModule_AddObject(module, "HotPaths", (PyObject *)&HotPathsType) < 0) {
        Py_DECREF(&HotPathsType);
        return -1;
    }
    return 0;
}
