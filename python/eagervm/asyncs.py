"""Worker threads of the eagervm runtime (DESIGN rule 8).

    t = eagervm.asyncs.Thread()      # takes a uid (limit: EAGERVM_WORKER_THREAD_LIMIT)
    with eagervm.asyncs.thread(t):   # ops this Python thread issues here run on t
        ...

    @eagervm.asyncs.thread(t)        # each call's ops run on t
    def step(x): ...

Tensors made on one Thread may be used on any other: the runtime synchronises
by itself. A Thread's uid goes back to the pool when it is garbage collected;
work already issued on it still finishes.
"""
from ._C import _asyncs_Thread as Thread, _asyncs_thread as thread

__all__ = ["Thread", "thread"]
