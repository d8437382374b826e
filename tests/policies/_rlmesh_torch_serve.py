"""Child-process entry point: serve ``make_mlp()`` as an ``rlmesh.torch.Model`` (rlmesh 0.1.0).

Run by ``test_interop.py``; not a test module. The policy is the module's argmax,
called on the torch tensor rlmesh hands it. Writes the bound address to
``--ready-fd`` once the server listens (found in /proc, as ``tests/_rlmesh_serve.py``
does: rlmesh's ``Model.serve`` reports no port).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore")  # the unpinned-edition warning of rlmesh
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ready-fd", type=int, required=True)
    args = parser.parse_args()

    import rlmesh
    import rlmesh.torch
    import torch

    from tests._rlmesh_serve import _announce, _listening_tcp_ports
    from tests.policies._models import make_mlp

    mlp = make_mlp()

    def predict(obs: Any) -> Any:
        with torch.no_grad():
            return int(mlp(obs.to(torch.float32)).argmax())

    def watch() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ports = _listening_tcp_ports()
            if ports:
                _announce(args.ready_fd, f"tcp://127.0.0.1:{ports[0]}")
                return
            time.sleep(0.02)
        sys.exit(3)

    threading.Thread(target=watch, daemon=True).start()
    rlmesh.torch.Model(predict).serve("127.0.0.1:0", options=rlmesh.ServeOptions())


if __name__ == "__main__":
    main()
