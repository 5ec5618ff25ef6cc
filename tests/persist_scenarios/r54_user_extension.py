# Review 54 (user_cext): a user C extension whose compiled code differs between A and B: a user extension's functions and types are not persisted since.
# a user C extension module (outside site-packages) whose compiled code differs between A and B; its function is a global
# alone: a user extension is loaded for every later call (which persists nothing)
import os, sys, subprocess, sysconfig, tempfile

val = "2.0" if os.environ["PHASE"] == "A" else "3.0"
d = tempfile.mkdtemp(prefix="r54c")
src = os.path.join(d, "r54ext.c")
with open(src, "w") as fh:
    fh.write(
        "#include <Python.h>\nstatic PyObject* scale(PyObject* s, PyObject* a){return PyFloat_FromDouble(%s);}\n"
        'static PyMethodDef M[]={{"scale",scale,METH_NOARGS,NULL},{NULL,NULL,0,NULL}};\n'
        'static struct PyModuleDef D={PyModuleDef_HEAD_INIT,"r54ext",NULL,-1,M};\n'
        "PyMODINIT_FUNC PyInit_r54ext(void){return PyModule_Create(&D);}\n" % val
    )
so = os.path.join(d, "r54ext" + sysconfig.get_config_var("EXT_SUFFIX"))
subprocess.check_call(
    ["gcc", "-shared", "-fPIC", "-O1", "-I", sysconfig.get_paths()["include"], src, "-o", so]
)
sys.path.insert(0, d)
import r54ext


def f(a):
    return a * r54ext.scale()


show("c1", lambda: jax.jit(f)(x))
