"""Triton Python-backend models run outside Triton: the same ``model.py``, another host.

The moderation model is one Triton Python-backend model (its code is the repository's
``moderation/<version>/model.py``). This package runs that file unchanged where Triton is not:
:mod:`modelhost.python_backend` loads and calls it (with :mod:`modelhost.triton_utils` in the
place of Triton's ``triton_python_backend_utils``, and :mod:`modelhost.pbtxt` reading its
``config.pbtxt``); the worker's ``inprocess`` backend (``engine.inprocess``) and MLServer's custom
runtime (:mod:`modelhost.mlserver_runtime`) are its two hosts.

It imports numpy and the standard library only (and ``mlserver`` in the runtime's module), so it
also runs in MLServer's own virtual environment, which has none of modstream's dependencies.
"""
