"""A bare client of a Streamlit server's websocket, as any program can be: no browser, no
page shown, no sign-in. It asks for a page to run and sends widget values and triggers
straight to the server, as Streamlit's own front end does, in its protobufs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.Element_pb2 import Element as ElementProto
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.sync.client import ClientConnection, connect

STREAM_PATH = "/_stcore/stream"
RUN_TIMEOUT_S = 120.0
TEXT_KINDS = ("markdown", "alert", "heading", "exception")


@dataclass(frozen=True)
class Element:
    kind: str  # the proto's kind: button, text_input, alert, markdown, exception, ...
    widget_id: str  # a widget's id; "" for what is only shown
    label: str  # a widget's label
    body: str  # what a text element says


@dataclass(frozen=True)
class Page:
    elements: list[Element]

    @property
    def text(self) -> str:
        return "\n".join(e.body for e in self.elements if e.kind in TEXT_KINDS)

    def widget(self, kind: str, label: str) -> Element:
        found = [e for e in self.elements if e.kind == kind and e.label == label]
        assert len(found) == 1, (kind, label, self.elements)
        return found[0]


def trigger(widget_id: str) -> WidgetState:
    """A button's click (a form's submit button too)."""
    return WidgetState(id=widget_id, trigger_value=True)


def text(widget_id: str, value: str) -> WidgetState:
    return WidgetState(id=widget_id, string_value=value)


class StreamClient:
    """One session on the server at ``base`` (``http://host:port``), connecting from
    ``source`` (a loopback address of the caller's choosing: the one the server sees)."""

    def __init__(self, base: str, *, source: str | None = None) -> None:
        url = base.replace("http://", "ws://", 1) + STREAM_PATH
        extra = {"source_address": (source, 0)} if source else {}
        self._ws: ClientConnection = connect(
            url, subprotocols=["streamlit"], open_timeout=30, max_size=None, **extra
        )

    def run(self, page: str = "", widgets: Sequence[WidgetState] = ()) -> Page:
        """Run the page whose URL path is ``page`` ("" for the default) with ``widgets``
        set, as a rerun of this session; what it showed once the script finished (the
        last run, when the script asked for another)."""
        message = BackMsg()
        message.rerun_script.query_string = ""
        message.rerun_script.page_name = page
        message.rerun_script.widget_states.widgets.extend(widgets)
        self._ws.send(message.SerializeToString())
        elements: list[Element] = []
        while True:
            forward = ForwardMsg()
            forward.ParseFromString(self._ws.recv(timeout=RUN_TIMEOUT_S))
            kind = forward.WhichOneof("type")
            if kind == "script_finished":
                if forward.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    elements = []  # st.rerun(): what counts is the run that follows
                    continue
                return Page(elements)
            if kind == "delta" and forward.delta.WhichOneof("type") == "new_element":
                elements.append(_element(forward.delta.new_element))

    def close(self) -> None:
        self._ws.close()

    def __enter__(self) -> StreamClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _element(proto: ElementProto) -> Element:
    kind = str(proto.WhichOneof("type"))
    inner = getattr(proto, kind)
    body = getattr(inner, "body", "") or getattr(inner, "message", "")
    return Element(kind, getattr(inner, "id", ""), getattr(inner, "label", ""), str(body))
