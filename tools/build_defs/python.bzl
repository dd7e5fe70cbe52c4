"""The one place this repository's Python rules come from.

Every BUILD file loads py_* from here, so moving to rules_python is an edit of this file only.
"""

def py_library(**attrs):
    native.py_library(**attrs)

def py_binary(**attrs):
    native.py_binary(**attrs)

def py_test(**attrs):
    native.py_test(**attrs)
