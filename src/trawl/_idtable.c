/* An open-addressing table of (URL id, text hash) pairs for trawl.known_ids.
 *
 * The same table as known_ids._Generation (the reference, used when trawl is built
 * without compiling), in C: a probe reads two 64-bit numbers side by side in one flat
 * array, with no Python int made per slot read. A text hash of 0 marks a free slot, so
 * stored hashes have their lowest bit set.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_LOAD 0.7

typedef struct {
    PyObject_HEAD
    int64_t *pairs;   /* 2 * slots numbers: an id, then its marked text hash */
    Py_ssize_t slots; /* a power of two */
    Py_ssize_t size;  /* pairs held */
    Py_ssize_t limit; /* pairs held before the table should grow */
} IdTable;

static int64_t
mark(int64_t text_hash)
{
    return (int64_t)((uint64_t)text_hash | 1u);
}

/* The index in pairs of (uid, marked), or of the free slot that ends its probe. */
static Py_ssize_t
locate(const IdTable *table, int64_t uid, int64_t marked)
{
    const uint64_t mask = (uint64_t)table->slots - 1;
    uint64_t slot = (uint64_t)uid & mask;
    for (;;) {
        const int64_t *pair = table->pairs + 2 * slot;
        if (pair[1] == 0 || (pair[1] == marked && pair[0] == uid)) {
            return (Py_ssize_t)(2 * slot);
        }
        slot = (slot + 1) & mask;
    }
}

static void
put(IdTable *table, int64_t uid, int64_t marked)
{
    Py_ssize_t at = locate(table, uid, marked);
    if (table->pairs[at + 1] == 0) {
        table->pairs[at] = uid;
        table->pairs[at + 1] = marked;
        table->size++;
    }
}

static IdTable *
make(PyTypeObject *type, Py_ssize_t slots)
{
    if (slots < 1 || (slots & (slots - 1)) != 0) {
        PyErr_SetString(PyExc_ValueError, "slots must be a power of two");
        return NULL;
    }
    if ((size_t)slots > PY_SSIZE_T_MAX / (2 * sizeof(int64_t))) {
        PyErr_NoMemory();
        return NULL;
    }
    IdTable *table = (IdTable *)type->tp_alloc(type, 0);
    if (table == NULL) {
        return NULL;
    }
    table->pairs = PyMem_Calloc((size_t)slots * 2, sizeof(int64_t));
    if (table->pairs == NULL) {
        Py_DECREF(table);
        return (IdTable *)PyErr_NoMemory();
    }
    table->slots = slots;
    table->size = 0;
    table->limit = (Py_ssize_t)((double)slots * MAX_LOAD);
    return table;
}

static PyObject *
IdTable_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"slots", NULL};
    Py_ssize_t slots;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "n", keywords, &slots)) {
        return NULL;
    }
    return (PyObject *)make(type, slots);
}

static void
IdTable_dealloc(IdTable *table)
{
    PyMem_Free(table->pairs);
    Py_TYPE(table)->tp_free((PyObject *)table);
}

/* The two signed 64-bit arguments (uid, text hash); false with an error set if not. */
static int
two_ids(PyObject *const *args, Py_ssize_t nargs, int64_t *uid, int64_t *text_hash)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "expected (uid, text_hash)");
        return 0;
    }
    long long first = PyLong_AsLongLong(args[0]);
    if (first == -1 && PyErr_Occurred()) {
        return 0;
    }
    long long second = PyLong_AsLongLong(args[1]);
    if (second == -1 && PyErr_Occurred()) {
        return 0;
    }
    *uid = (int64_t)first;
    *text_hash = (int64_t)second;
    return 1;
}

static PyObject *
IdTable_find(IdTable *table, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t uid, text_hash;
    if (!two_ids(args, nargs, &uid, &text_hash)) {
        return NULL;
    }
    Py_ssize_t at = locate(table, uid, mark(text_hash));
    return PyBool_FromLong(table->pairs[at + 1] != 0);
}

static PyObject *
IdTable_add(IdTable *table, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t uid, text_hash;
    if (!two_ids(args, nargs, &uid, &text_hash)) {
        return NULL;
    }
    if (table->size >= table->slots - 1) {
        PyErr_SetString(PyExc_OverflowError, "the table is full");
        return NULL;
    }
    put(table, uid, mark(text_hash));
    Py_RETURN_NONE;
}

static PyObject *
IdTable_grown(IdTable *table, PyObject *Py_UNUSED(ignored))
{
    if (table->slots > PY_SSIZE_T_MAX / 2) {
        return PyErr_NoMemory();
    }
    IdTable *bigger = make(Py_TYPE(table), table->slots * 2);
    if (bigger == NULL) {
        return NULL;
    }
    for (Py_ssize_t at = 0; at < 2 * table->slots; at += 2) {
        if (table->pairs[at + 1] != 0) {
            put(bigger, table->pairs[at], table->pairs[at + 1]);
        }
    }
    return (PyObject *)bigger;
}

static PyObject *
IdTable_get_size(IdTable *table, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(table->size);
}

static PyObject *
IdTable_get_limit(IdTable *table, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(table->limit);
}

static PyObject *
IdTable_get_nbytes(IdTable *table, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(table->slots * 2 * (Py_ssize_t)sizeof(int64_t));
}

static PyMethodDef IdTable_methods[] = {
    {"find", (PyCFunction)(void (*)(void))IdTable_find, METH_FASTCALL,
     "find(uid, text_hash) -> bool: whether the pair is in the table."},
    {"add", (PyCFunction)(void (*)(void))IdTable_add, METH_FASTCALL,
     "add(uid, text_hash): put the pair in the table (once)."},
    {"grown", (PyCFunction)IdTable_grown, METH_NOARGS,
     "grown() -> IdTable: the same pairs in a table of twice the slots."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef IdTable_getset[] = {
    {"size", (getter)IdTable_get_size, NULL, "Pairs held.", NULL},
    {"limit", (getter)IdTable_get_limit, NULL, "Pairs held before it should grow.", NULL},
    {"nbytes", (getter)IdTable_get_nbytes, NULL, "Bytes of its array.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject IdTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "trawl._idtable.IdTable",
    .tp_doc = "IdTable(slots): (URL id, text hash) pairs in `slots` slots, a power of two.",
    .tp_basicsize = sizeof(IdTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = IdTable_new,
    .tp_dealloc = (destructor)IdTable_dealloc,
    .tp_methods = IdTable_methods,
    .tp_getset = IdTable_getset,
};

static struct PyModuleDef idtable_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "trawl._idtable",
    .m_doc = "An open-addressing table of (URL id, text hash) pairs (trawl.known_ids).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__idtable(void)
{
    if (PyType_Ready(&IdTableType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&idtable_module);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&IdTableType);
    if (PyModule_AddObject(module, "IdTable", (PyObject *)&IdTableType) < 0) {
        Py_DECREF(&IdTableType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
