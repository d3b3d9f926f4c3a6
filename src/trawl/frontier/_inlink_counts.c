/* In-link counts per URL id for trawl.frontier.inlinks, in C.
 *
 * The same counting as inlinks._Counts (the reference, used when trawl is built without
 * compiling): one in-link per candidate of a batch, the counts forgotten once they
 * cover `capacity` ids, and a URL reported each time its count reaches a power of
 * eight from 8 up to 8 ** max_level. Here the counts are an open-addressing table of
 * 64-bit ids and 32-bit counts, so counting a candidate makes no Python object.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_LOAD 0.7
#define EIGHTS 0x9249249249249249ull /* the bits of the powers of eight */

typedef struct {
    PyObject_HEAD
    int64_t *ids;
    uint32_t *counts;   /* 0 marks a free slot */
    Py_ssize_t slots;   /* a power of two */
    Py_ssize_t size;    /* ids counted */
    Py_ssize_t limit;   /* ids counted before the table must grow */
    Py_ssize_t first;   /* the slots it starts with (and goes back to when forgetting) */
    Py_ssize_t capacity;
    uint64_t top;       /* 8 ** max_level */
} InlinkCounts;

static int
allocate(InlinkCounts *self, Py_ssize_t slots)
{
    int64_t *ids = PyMem_Calloc((size_t)slots, sizeof(int64_t));
    uint32_t *counts = PyMem_Calloc((size_t)slots, sizeof(uint32_t));
    if (ids == NULL || counts == NULL) {
        PyMem_Free(ids);
        PyMem_Free(counts);
        PyErr_NoMemory();
        return 0;
    }
    PyMem_Free(self->ids);
    PyMem_Free(self->counts);
    self->ids = ids;
    self->counts = counts;
    self->slots = slots;
    self->size = 0;
    self->limit = (Py_ssize_t)((double)slots * MAX_LOAD);
    return 1;
}

static Py_ssize_t
locate(const InlinkCounts *self, int64_t uid)
{
    const uint64_t mask = (uint64_t)self->slots - 1;
    uint64_t slot = (uint64_t)uid & mask;
    while (self->counts[slot] != 0 && self->ids[slot] != uid) {
        slot = (slot + 1) & mask;
    }
    return (Py_ssize_t)slot;
}

/* Twice the slots, the same counts; false with an error set when out of memory. */
static int
grow(InlinkCounts *self)
{
    int64_t *old_ids = self->ids;
    uint32_t *old_counts = self->counts;
    Py_ssize_t old_slots = self->slots, old_size = self->size;
    self->ids = NULL;
    self->counts = NULL;
    if (old_slots > PY_SSIZE_T_MAX / 2 || !allocate(self, old_slots * 2)) {
        self->ids = old_ids;
        self->counts = old_counts;
        self->slots = old_slots;
        self->size = old_size;
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        return 0;
    }
    for (Py_ssize_t at = 0; at < old_slots; at++) {
        if (old_counts[at] != 0) {
            Py_ssize_t slot = locate(self, old_ids[at]);
            self->ids[slot] = old_ids[at];
            self->counts[slot] = old_counts[at];
        }
    }
    self->size = old_size;
    PyMem_Free(old_ids);
    PyMem_Free(old_counts);
    return 1;
}

static PyObject *
InlinkCounts_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"capacity", "max_level", NULL};
    Py_ssize_t capacity;
    int max_level;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ni", keywords, &capacity, &max_level)) {
        return NULL;
    }
    if (capacity < 0 || max_level < 0 || max_level > 10) {
        PyErr_SetString(PyExc_ValueError, "capacity >= 0 and 0 <= max_level <= 10");
        return NULL;
    }
    Py_ssize_t first = 16;
    while (first < PY_SSIZE_T_MAX / 2 && (double)first * MAX_LOAD < (double)capacity) {
        first *= 2;
    }
    InlinkCounts *self = (InlinkCounts *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->ids = NULL;
    self->counts = NULL;
    if (!allocate(self, first)) {
        Py_DECREF(self);
        return NULL;
    }
    self->first = first;
    self->capacity = capacity;
    self->top = 1ull << (3 * max_level);
    return (PyObject *)self;
}

static void
InlinkCounts_dealloc(InlinkCounts *self)
{
    PyMem_Free(self->ids);
    PyMem_Free(self->counts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Count one in-link for uid; its level when the count reached one, else 0; -1 on error. */
static int
count(InlinkCounts *self, int64_t uid)
{
    if (self->size >= self->limit && !grow(self)) {
        return -1;
    }
    Py_ssize_t slot = locate(self, uid);
    if (self->counts[slot] == 0) {
        self->ids[slot] = uid;
        self->size++;
    }
    if (self->counts[slot] < UINT32_MAX) {
        self->counts[slot]++;
    }
    uint64_t n = self->counts[slot];
    if ((n & (n - 1)) == 0 && (n & EIGHTS) != 0 && n > 1 && n <= self->top) {
        return __builtin_ctzll(n) / 3;
    }
    return 0;
}

static PyObject *
InlinkCounts_observe(InlinkCounts *self, PyObject *candidates)
{
    if (self->size >= self->capacity) {
        if (self->slots != self->first) {
            if (!allocate(self, self->first)) {
                return NULL;
            }
        }
        else {
            memset(self->counts, 0, (size_t)self->slots * sizeof(uint32_t));
            self->size = 0;
        }
    }
    PyObject *items = PySequence_Fast(candidates, "candidates must be a sequence");
    if (items == NULL) {
        return NULL;
    }
    PyObject *reached = PyDict_New();
    if (reached == NULL) {
        Py_DECREF(items);
        return NULL;
    }
    Py_ssize_t total = PySequence_Fast_GET_SIZE(items);
    PyObject **each = PySequence_Fast_ITEMS(items);
    for (Py_ssize_t i = 0; i < total; i++) {
        PyObject *candidate = each[i];
        if (!PyTuple_Check(candidate) || PyTuple_GET_SIZE(candidate) < 1) {
            PyErr_SetString(PyExc_TypeError, "a candidate must be a tuple led by its id");
            goto fail;
        }
        PyObject *id = PyTuple_GET_ITEM(candidate, 0);
        long long uid = PyLong_AsLongLong(id);
        if (uid == -1 && PyErr_Occurred()) {
            goto fail;
        }
        int level = count(self, (int64_t)uid);
        if (level < 0) {
            goto fail;
        }
        if (level > 0) {
            PyObject *value = PyLong_FromLong(level);
            if (value == NULL || PyDict_SetItem(reached, id, value) < 0) {
                Py_XDECREF(value);
                goto fail;
            }
            Py_DECREF(value);
        }
    }
    Py_DECREF(items);
    PyObject *levels = PyDict_Items(reached);
    Py_DECREF(reached);
    return levels;
fail:
    Py_DECREF(items);
    Py_DECREF(reached);
    return NULL;
}

static PyMethodDef InlinkCounts_methods[] = {
    {"observe", (PyCFunction)InlinkCounts_observe, METH_O,
     "observe(candidates) -> list[(id, level)]: count one in-link per candidate."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject InlinkCountsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "trawl.frontier._inlink_counts.InlinkCounts",
    .tp_doc = "InlinkCounts(capacity, max_level): in-link counts per URL id.",
    .tp_basicsize = sizeof(InlinkCounts),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = InlinkCounts_new,
    .tp_dealloc = (destructor)InlinkCounts_dealloc,
    .tp_methods = InlinkCounts_methods,
};

static struct PyModuleDef inlink_counts_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "trawl.frontier._inlink_counts",
    .m_doc = "In-link counts per URL id (trawl.frontier.inlinks).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__inlink_counts(void)
{
    if (PyType_Ready(&InlinkCountsType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&inlink_counts_module);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&InlinkCountsType);
    if (PyModule_AddObject(module, "InlinkCounts", (PyObject *)&InlinkCountsType) < 0) {
        Py_DECREF(&InlinkCountsType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
