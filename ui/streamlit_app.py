"""The drills dashboard: `drills ui` (or `streamlit run ui/streamlit_app.py`).

This file sets the page up, decides who may look, and hands over to the page the
navigation chose. Each page lives in ui/app_pages/; what they read is in ui/data.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

# `streamlit run` puts ui/ on the path, not the project root that holds drills/ and ui/.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402

from ui import auth, components  # noqa: E402
from ui.settings import load_settings  # noqa: E402

PAGES = [
    st.Page("app_pages/fleet.py", title="Fleet", icon=":material/dashboard:", default=True),
    st.Page("app_pages/readiness.py", title="Readiness", icon=":material/fact_check:"),
    st.Page("app_pages/history.py", title="Drill history", icon=":material/monitoring:"),
    st.Page("app_pages/declare.py", title="Incident", icon=":material/emergency_home:"),
    st.Page("app_pages/plans.py", title="Plans", icon=":material/description:"),
    st.Page("app_pages/capacity.py", title="Capacity", icon=":material/savings:"),
]


def main() -> None:
    st.set_page_config(
        page_title="drills — DR dashboard", page_icon=":material/health_and_safety:", layout="wide"
    )
    settings = load_settings()
    access = auth.current_access(settings)
    if access.method == "lab":
        st.warning(
            "**Lab mode**: no sign-in is required, and anyone who can open this page may "
            "declare an incident. Never run a production dashboard like this.",
            icon=":material/science:",
        )
    with st.sidebar:
        auth.sign_out_control(access)
    if not access.can_view:
        st.title("drills")
        st.info("This dashboard is for signed-in users only.")
        auth.sign_in(settings, access, "app.sign_in")
        st.stop()
    page = st.navigation(PAGES)
    # Once, above whichever page runs, in a slot that is there even when empty: the page
    # below keeps its place when the banner comes or goes (a failback's end), or the live
    # view that watched it is drawn anew beside its stale copy.
    with st.container():
        components.serving_banner(settings)
    page.run()


main()
