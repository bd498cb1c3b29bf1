"""What a compiled kernel's machine code holds, read without a GPU: registers, spills, shared memory
and the Hopper instructions the fast path needs (wgmma, TMA), from the cubin that
``kernels.testing.compile_for_gpu`` builds, with the cuobjdump Triton's NVIDIA backend ships.

SASS names: ``HGMMA`` is a warpgroup MMA (PTX ``wgmma.mma_async``; ``QGMMA`` its fp8 form); ``UTMALDG``/``UTMASTG`` are
TMA tensor loads/stores (PTX ``cp.async.bulk.tensor``); ``LDL``/``STL`` are local-memory (spill)
loads/stores."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

#: SASS opcodes counted by ``cubin_report``
SASS_OPS = ("HGMMA", "QGMMA", "UTMALDG", "UTMASTG", "LDL", "STL", "MUFU.EX2")


def _cuobjdump(compiled, flag: str) -> str:
    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.asm["cubin"])
    try:
        return subprocess.run([tool, flag, f.name], capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)


def cubin_report(compiled) -> dict:
    """{"registers", "stack_bytes", "shared_bytes", "num_warps", and a count per ``SASS_OPS`` name}
    for a kernel compiled with ``compile_for_gpu``. ``stack_bytes`` > 0 or any LDL/STL means
    register spills."""
    res = _cuobjdump(compiled, "-res-usage")
    sass = _cuobjdump(compiled, "-sass")
    row = {
        "registers": int(re.search(r"REG:(\d+)", res).group(1)),
        "stack_bytes": int(re.search(r"STACK:(\d+)", res).group(1)),
        "shared_bytes": int(compiled.metadata.shared),
        "num_warps": int(compiled.metadata.num_warps),
    }
    opcodes = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass)
    for op in SASS_OPS:
        row[op] = sum(1 for o in opcodes if o == op or o.startswith(op + "."))
    return row
