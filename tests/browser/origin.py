#!/usr/bin/env python3
"""The browser tests' origin, run inside a test network namespace.  Each
request's path is appended to LOG.  Answers close the connection and carry
no Content-Length (so every request reaches kz-egress on a fresh proxy
connection).

  /            a page titled "kz test page"
  /login       a page with a text input and a password input
  /secret      a page whose focused element is a password input
  /probe?p=N   a page whose subresources and script ask for 127.0.0.1:N,
               localhost:N, the worker's relay port and 169.254.169.254,
               then GET /report?<what each fetch did>
  /rtc?h=H&p=N a page whose RTCPeerConnection names its own servers
               (stun:H:N and turn:H:N?transport=tcp), opens a data
               channel, gathers candidates for up to 8 s and then GETs
               /rtc-report?<type/protocol/address of each, "none" if
               none>&cfg=<the transport policy>|<the servers in use>
  /slow?ms=N   the page titled "slow page", answered after N ms
  /disguise    a page titled "disguise" whose script makes everything it
               could be asked through (JSON.stringify, the document's
               title) name another site
  /pwdisguise  a focused password input, with a script that hides it from
               document.activeElement and reports what is typed into it
               as GET /typed?<text>
  /spin?n=N    a page whose N Web Workers spin forever
  /alert       a page that opens an alert as it loads, then is titled
               "after alert"
  /state       a page titled "state:COOKIE|STORAGE" with what it found of
               an earlier visit ("none" for each when nothing), which then
               leaves a cookie and a localStorage item behind
  /pwrace      a text input #note and a password input #pw; the page
               moves the focus onto #pw on a 0 ms interval, from a timer
               set in #note's focus handler and synchronously in #note's
               keydown, keypress, beforeinput, input and blur handlers
  /pwhidden    password fields in other forms (type=text inputs the page
               turns into password fields in their beforeinput (#flip)
               or input (#flip2) handler, autocomplete current-password
               (#ac) and new-password (#nw), -webkit-text-security (#dots),
               a password input in an open shadow root (#host) and one in
               a same-origin frame that takes the focus whenever the frame
               does (#frame)), and two plain text fields, one
               in the page (#plain), one in a shadow root (#texthost)
  /mem        a page that, once loaded, allocates and touches 64 MiB
               ArrayBuffers in a loop that never yields
  /popup?u=U   a page that opens U with window.open and by a click on its
               own target=_blank link (top left), as it loads, titled
               "popup:W" (W: "window" if window.open gave one, else "none")
  /framesecret a focused same-origin frame whose focused element is a
               password input
  /spinonce    a page whose script, once loaded, spins its main thread
               forever (until it is terminated), once
  /spinever    a page whose script, once loaded, spins its main thread
               from a 0 ms interval: terminated, it spins again at once
  /spinfor?ms=N a page whose script, once loaded, keeps its main thread
               busy for N ms, once, and then idles
  /spinclick   a page whose mousedown handler spins forever, and whose
               button #spin (far from the top left) spins on a click
  /spinpopup   a page that opens /spinever in a popup on a click: the
               popup shares its opener's renderer, so its main thread too
  /spinnav     a page that, once loaded, sets its location to / and spins
               in the same script, holding its navigation half done
               The /pw* pages report each field's value when it changes
               as GET /v/ID?VALUE (on a 50 ms interval).

usage: origin.py ADDR PORT LOG
"""
import http.server
import sys
import time
import urllib.parse

PAGE = """<!doctype html><html><head><title>kz test page</title></head>
<body><h1>kz test page</h1><p id=p>hello from the test origin</p>
<a id=next href="/">again</a></body></html>"""

LOGIN = """<!doctype html><html><head><title>login</title></head><body>
<form><input id=user type=text aria-label=user>
<input id=pass type=password aria-label=password>
<button id=go type=button onclick="document.title='clicked'">go</button>
</form></body></html>"""

SECRET = """<!doctype html><html><head><title>secret</title></head><body>
<input id=pass type=password autofocus aria-label=password></body></html>"""

PROBE = """<!doctype html><html><head><title>probe</title></head><body>
<img src="http://127.0.0.1:{p}/img"><img src="http://localhost:{p}/img">
<img src="http://127.0.0.1:3128/img">
<img src="http://169.254.169.254/latest/meta-data/">
<script>
const u = ["http://127.0.0.1:{p}/f", "http://localhost:{p}/f",
  "http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:3128/f"];
Promise.allSettled(u.map(x => fetch(x, {{mode: "no-cors"}}))).then(r => {{
  const s = r.map(x => x.status === "fulfilled" ? "reached" : "failed");
  return fetch("/report?" + s.join(","));
}}).finally(() => {{ document.title = "probed"; }});
</script></body></html>"""


STATE = """<!doctype html><html><head><title>state</title></head><body>
<script>
const c = document.cookie, l = localStorage.getItem("kz");
document.cookie = "kz=tenant-secret; max-age=86400";
localStorage.setItem("kz", "tenant-secret");
document.title = "state:" + (c || "none") + "|" + (l || "none");
</script></body></html>"""

RTC = """<!doctype html><html><head><title>rtc</title></head><body>
<script>
const own = "{h}:{p}", got = [];
const pc = new RTCPeerConnection({{iceServers: [
  {{urls: "stun:" + own}},
  {{urls: "turn:" + own + "?transport=tcp", username: "page", credential: "page"}}]}});
pc.createDataChannel("kz");
const report = () => {{
  const c = pc.getConfiguration();
  fetch("/rtc-report?" + (got.length ? got.join(",") : "none") + "&cfg=" +
    c.iceTransportPolicy + "|" + c.iceServers.map(s => s.urls).join("|"))
    .finally(() => {{ document.title = "rtc done"; }});
}};
const t = setTimeout(report, 8000);
pc.onicecandidate = (e) => {{
  if (!e.candidate) {{ clearTimeout(t); report(); return; }}
  const f = e.candidate.candidate.split(" ");
  got.push(f[7] + "/" + f[2].toLowerCase() + "/" + f[4]);
}};
pc.createOffer().then(o => pc.setLocalDescription(o)).catch(() => {{
  got.push("error"); report(); }});
</script></body></html>"""

DISGUISE = """<!doctype html><html><head><title>disguise</title></head>
<body><script>
const real = JSON.stringify;
JSON.stringify = function (v, ...r) {
  if (Array.isArray(v)) return real(["https://bank.example/login", "Bank login"]);
  return real(v, ...r);
};
Object.defineProperty(Document.prototype, "title",
  { get() { return "Bank login"; }, configurable: true });
</script><p>nothing here</p></body></html>"""

PWDISGUISE = """<!doctype html><html><head><title>pwdisguise</title></head>
<body><input id=pass type=password autofocus aria-label=password>
<script>
const el = document.getElementById("pass");
el.addEventListener("input", () => fetch("/typed?" + encodeURIComponent(el.value)));
const real = Object.getOwnPropertyDescriptor(Document.prototype, "activeElement");
Object.defineProperty(Document.prototype, "activeElement", { configurable: true,
  get() { const e = real.get.call(this);
    return e === el ? { tagName: "DIV", type: "text", focus() {}, click() {} } : e; } });
const qs = Document.prototype.querySelector;
Document.prototype.querySelector = function (q) {
  const e = qs.call(this, q);
  return e === el ? { tagName: "DIV", type: "text", focus() { el.focus(); } } : e;
};
</script></body></html>"""

SPIN = """<!doctype html><html><head><title>spin</title></head><body><script>
const src = URL.createObjectURL(new Blob(["for (;;) {{}}"], {{type: "text/javascript"}}));
for (let i = 0; i < {n}; i++) new Worker(src);
document.title = "spinning";
</script></body></html>"""

MEM = """<!doctype html><html><head><title>mem</title></head><body><script>
const held = [];
onload = () => setTimeout(() => {{
  for (;;) {{ const b = new ArrayBuffer(64 << 20); new Uint8Array(b).fill(7);
    held.push(b); }} }}, 50);
</script></body></html>"""

POPUP = """<!doctype html><html><head><title>popup</title></head><body>
<a id=a target=_blank href="{u}">x</a><script>
const w = window.open("{u}", "_blank");
document.getElementById("a").click();
document.title = "popup:" + (w ? "window" : "none");
</script></body></html>"""

ALERT = """<!doctype html><html><head><title>alert</title></head><body>
<script>alert("kz"); document.title = "after alert";</script></body></html>"""

# Reports each field's value when it changes, as GET /v/ID?VALUE.
REPORT = """<script>
const seen = {};
setInterval(() => { for (const [id, el] of Object.entries(window.fields))
  if (el.value !== seen[id]) { seen[id] = el.value;
    fetch("/v/" + id + "?" + encodeURIComponent(el.value)); } }, 50);
</script>"""

PWRACE = """<!doctype html><html><head><title>pwrace</title></head><body>
<input id=note type=text aria-label=note>
<input id=pw type=password aria-label=password>
<script>
const note = document.getElementById("note"), pw = document.getElementById("pw");
window.fields = {note, pw};
const flip = () => pw.focus();
setInterval(flip, 0);
note.addEventListener("focus", () => setTimeout(flip, 0));
for (const t of ["keydown", "keypress", "beforeinput", "input", "blur"])
  note.addEventListener(t, flip);
</script>""" + REPORT + """</body></html>"""

PWHIDDEN = """<!doctype html><html><head><title>pwhidden</title></head><body>
<input id=flip type=text aria-label=flip>
<input id=flip2 type=text aria-label=flip2>
<input id=ac type=text autocomplete="username current-password" aria-label=ac>
<input id=nw type=text autocomplete=new-password aria-label=nw>
<input id=dots type=text style="-webkit-text-security: disc" aria-label=dots>
<div id=host></div><div id=texthost></div>
<iframe id=frame srcdoc="<input id=p type=password>
<script>const p = document.getElementById('p'); p.focus();
addEventListener('focus', () => p.focus());</script>"></iframe>
<input id=plain type=text aria-label=plain>
<script>
const $ = (id) => document.getElementById(id);
const shadow = (host, type) => {
  const r = $(host).attachShadow({mode: "open", delegatesFocus: true});
  r.innerHTML = "<input type=" + type + ">";
  return r.firstChild;
};
window.fields = {flip: $("flip"), flip2: $("flip2"), ac: $("ac"), nw: $("nw"),
  dots: $("dots"), plain: $("plain"), host: shadow("host", "password"),
  texthost: shadow("texthost", "text")};
$("flip").addEventListener("beforeinput", (e) => { e.target.type = "password"; });
$("flip2").addEventListener("input", (e) => { e.target.type = "password"; });
$("frame").addEventListener("load", () => {
  window.fields.frame = $("frame").contentDocument.getElementById("p"); });
</script>""" + REPORT + """</body></html>"""

FRAMESECRET = """<!doctype html><html><head><title>framesecret</title></head>
<body><iframe id=frame srcdoc="<input id=p type=password aria-label=password>
<script>document.getElementById('p').focus()</script>"></iframe>
</body></html>"""

# The spinning pages start 100 ms after their load, so that the
# navigation to them ends as any other.
SPINONCE = """<!doctype html><html><head><title>spinonce</title></head><body>
<h1>spins once</h1><script>
onload = () => setTimeout(() => { for (;;) {} }, 100);
</script></body></html>"""

SPINEVER = """<!doctype html><html><head><title>spinever</title></head><body>
<h1>spins ever</h1><script>
onload = () => setTimeout(() => setInterval(() => { for (;;) {} }, 0), 100);
</script></body></html>"""

SPINFOR = """<!doctype html><html><head><title>spinfor</title></head><body>
<h1>spins a while</h1><script>
onload = () => setTimeout(() => {{
  const end = Date.now() + {ms}; while (Date.now() < end) {{}} }}, 100);
</script></body></html>"""

SPINCLICK = """<!doctype html><html><head><title>spinclick</title></head>
<body><h1>spins on a click</h1>
<button id=spin style="position: absolute; left: 600px; top: 400px">spin</button>
<script>
const spin = () => { for (;;) {} };
addEventListener("mousedown", spin);
document.getElementById("spin").addEventListener("click", spin);
</script></body></html>"""

SPINPOPUP = """<!doctype html><html><head><title>spinpopup</title></head>
<body><h1>spins in a popup</h1><script>
addEventListener("click", () => window.open("/spinever", "_blank"));
</script></body></html>"""

SPINNAV = """<!doctype html><html><head><title>spinnav</title></head><body>
<h1>navigates and spins</h1><script>
onload = () => setTimeout(() => { location.href = "/"; for (;;) {} }, 100);
</script></body></html>"""

SLOW = """<!doctype html><html><head><title>slow page</title></head>
<body>slow</body></html>"""

# The pages served as they are, by path.
STATIC = {"/login": LOGIN, "/secret": SECRET, "/state": STATE,
          "/disguise": DISGUISE, "/pwdisguise": PWDISGUISE, "/alert": ALERT,
          "/pwrace": PWRACE, "/pwhidden": PWHIDDEN,
          "/framesecret": FRAMESECRET, "/spinonce": SPINONCE,
          "/spinever": SPINEVER, "/spinclick": SPINCLICK,
          "/spinpopup": SPINPOPUP, "/spinnav": SPINNAV}


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *a):
        pass

    def do_GET(self):
        with open(sys.argv[3], "a") as f:
            f.write(self.path + "\n")
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path in STATIC:
            body = STATIC[u.path]
        elif u.path == "/probe":
            body = PROBE.format(p=int(q.get("p", ["1"])[0]))
        elif u.path == "/rtc":
            body = RTC.format(h=q.get("h", ["10.9.9.9"])[0],
                              p=int(q.get("p", ["3478"])[0]))
        elif u.path == "/spin":
            body = SPIN.format(n=int(q.get("n", ["2"])[0]))
        elif u.path == "/spinfor":
            body = SPINFOR.format(ms=int(q.get("ms", ["1000"])[0]))
        elif u.path == "/mem":
            body = MEM.format()
        elif u.path == "/popup":
            body = POPUP.format(u=q.get("u", ["/"])[0].replace('"', ""))
        elif u.path == "/slow":
            time.sleep(int(q.get("ms", ["1000"])[0]) / 1000.0)
            body = SLOW
        else:
            body = PAGE
        b = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b)


http.server.ThreadingHTTPServer.allow_reuse_address = True
http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
