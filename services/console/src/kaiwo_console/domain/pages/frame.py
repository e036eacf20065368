"""The frame every page shares: navigation, stylesheet, the live-update script, sign-in."""

from __future__ import annotations

from html import escape
from typing import Final

PAGES: Final = (
    ("/workloads", "Workloads"),
    ("/queues", "Queues"),
    ("/nodes", "GPU nodes"),
    ("/models", "Models"),
)

STYLE: Final = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2a36;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}
header a{color:#cfe3ff;text-decoration:none}header a.on{color:#fff;font-weight:600}
header .who{margin-left:auto;color:#9fb3c8;font-size:12px}
main{padding:12px 16px}table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e4e4e4;vertical-align:top}
th{background:#f0f2f5;font-weight:600}.phase{font-weight:600}.muted{color:#777}
.why{color:#8a5a00}form.filters{margin:0 0 10px;display:flex;gap:8px;flex-wrap:wrap}
form.filters input{width:120px}section{margin-bottom:22px}h2{margin:8px 0}
ul.tree{list-style:none;padding-left:18px;border-left:1px solid #ddd}
ul.tree li{margin:2px 0}ul.on-node{margin:0;padding-left:16px}td.used{white-space:nowrap}
.t{color:#777;font-size:12px;margin-right:6px}
"""

SCRIPT: Final = """"use strict";
(function(){var seen=null;var source=new EventSource('/events');
source.onmessage=function(e){if(seen===null){seen=e.data;return}
if(e.data===seen)return;seen=e.data;
fetch(location.href,{headers:{'X-Console-Fragment':'1'}}).then(function(r){return r.text()})
.then(function(html){document.querySelector('main').innerHTML=html;});};})();
"""


def login_body(message: str = "") -> str:
    said = f"<p class=why>{escape(message)}</p>" if message else ""
    return (
        f"<h2>Sign in</h2>{said}<p>Paste a Kubernetes token (<code>kubectl create token "
        "SERVICE-ACCOUNT</code>): the console shows the namespaces it may list KaiwoJobs in."
        '</p><form method=post action="/login"><input type=password name=token size=60 '
        "autocomplete=off> <button>Sign in</button></form>"
    )


def page(title: str, path: str, body: str, *, who: str) -> str:
    nav = "".join(
        f'<a href="{href}"{" class=on" if path.startswith(href) else ""}>{escape(label)}</a>'
        for href, label in PAGES
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)} · kaiwo</title><style>{STYLE}</style></head><body>"
        f"<header><strong>kaiwo</strong>{nav}<span class=who>{escape(who)}</span></header>"
        f'<main>{body}</main><script src="/console.js"></script></body></html>'
    )
