"""Warm app processes up before students arrive: python deploy/warm.py URL [URL...]

One script run of app.py per process, over Streamlit's websocket, as a browser's first
visit would make. It imports torch, plotly and pandas in one thread (the first students
then do not race each other through those imports) and calls st.navigation, which ends
Streamlit's pages-folder mode for the process (ui/route.py). Exits non-zero if a run
fails or does not finish within 180 s.
"""

from __future__ import annotations

import asyncio
import sys

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

FINISHED_EARLY = 2  # ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN


async def warm(url: str) -> None:
    async with websockets.connect(
        url.replace("http", "ws", 1) + "/_stcore/stream",
        subprotocols=["streamlit"],  # type: ignore[list-item]
        max_size=None,
        open_timeout=60,
    ) as ws:
        msg = BackMsg()
        msg.rerun_script.query_string = ""
        msg.rerun_script.page_name = ""
        await ws.send(msg.SerializeToString())
        while True:
            f = ForwardMsg()
            f.ParseFromString(await ws.recv())
            kind = f.WhichOneof("type")
            if kind == "delta" and f.delta.WhichOneof("type") == "new_element":
                if f.delta.new_element.WhichOneof("type") == "exception":
                    raise RuntimeError(f"{url}: the warm-up run failed")
            elif kind == "script_finished" and f.script_finished != FINISHED_EARLY:
                return


async def main(urls: list[str]) -> None:
    await asyncio.wait_for(asyncio.gather(*(warm(u) for u in urls)), timeout=180)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
