"""Headless Chromium for the kit's page tests: the `browser` fixture (one per session) and `Tab`,
a page open in it with its console errors, what it shows and its screenshots.

Chromium is Debian's `chromium` package: the session fixture installs it with apt-get when it is
missing and this process runs as root (about 16 s here); elsewhere the tests skip and say why,
except under CI, where they fail rather than pass unseen. The `cjk_font` fixture installs a font
with Chinese glyphs the same way, for the `--lang zh` pages, and `Tab.fonts` says which fonts
drew an element's text. The tests drive it over the DevTools
protocol on a pipe (`--remote-debugging-pipe`: JSON messages ending in a NUL byte, commands on
file descriptor 3 and replies on 4), so they need no Python package and no network. Screenshots
land in `tests/artifacts/` (git-ignored). Registered for every test by `tests/conftest.py`.

`Tab.layout` measures what a reader would see go wrong whatever the content: a box of text
narrower than its text needs (the lesser of the text on one line and `MIN_CHARS` characters of
its font), and the page wider than the window; `Tab.pdf` prints the page on A4, as a person
printing it would, and `pdf_pages` counts its pages.
"""

import base64
import fcntl
import json
import math
import os
import re
import select
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import KIT_ROOT

ARTIFACTS = KIT_ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium fills its log with failed connections on a
# machine without network; the profile is a fresh folder per session.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
)
WIDTH = 1000  # CSS pixels of the window: a laptop browser's
HEIGHT = 900  # the first screen
MIN_CHARS = 12  # the narrowest box of text a reader can read, in characters of its font ("0")
A4_INCHES = (8.27, 11.69)
PRINT_MARGIN_INCHES = 0.4  # Chromium's default margin, each side
CSS_PX_PER_INCH = 96
# The boxes (a table's scrolled box, say) whose content is wider than they are: cut on paper.
CLIPPED = """[...document.body.querySelectorAll("*")]
  .filter((el) => el.checkVisibility() && el.scrollWidth > el.clientWidth + 1
                  && getComputedStyle(el).overflowX !== "visible")
  .map((el) => `<${el.tagName.toLowerCase()} class="${el.className}"> ${el.clientWidth} px `
               + `shows ${el.scrollWidth} px`)"""
PDF_PAGE = re.compile(rb"/Type\s*/Page\b(?!s)")
# Every element with text of its own, laid out, whose box is narrower than its text needs: the
# lesser of its text on one line and MIN_CHARS characters of its font. An inline element's box is
# the one it wraps in; a chart's text (SVG) scales with the chart and is left out. Then how far
# the page reaches past the window's right edge.
LAYOUT = """(() => {
  const ruler = document.createElement("canvas").getContext("2d");
  const narrow = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (el.closest("svg") || !el.checkVisibility({visibilityProperty: true})) continue;
    const style = getComputedStyle(el);
    const own = [...el.childNodes].filter((node) => node.nodeType === Node.TEXT_NODE)
      .map((node) => node.textContent).join(" ").replace(/\\s+/g, " ").trim();
    const text = style.textTransform === "uppercase" ? own.toUpperCase() : own;
    if (!text) continue;
    ruler.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const needs = Math.min(ruler.measureText(text).width,
                           ruler.measureText("0".repeat(MIN_CHARS)).width);
    let box = el;  // an inline element wraps within the box that holds it
    while (["inline", "contents"].includes(getComputedStyle(box).display)) box = box.parentElement;
    const sized = getComputedStyle(box);
    const sides = ["paddingLeft", "paddingRight", "borderLeftWidth", "borderRightWidth"]
      .reduce((sum, side) => sum + parseFloat(sized[side]), 0);
    const width = box.getBoundingClientRect().width - sides;
    if (width + 1 < needs) {
      narrow.push(`<${el.tagName.toLowerCase()} class="${el.className}"> ${Math.round(width)} px `
                  + `for ${Math.round(needs)} px: ${text.slice(0, 60)}`);
    }
  }
  return {narrow, overflow: document.documentElement.scrollWidth - window.innerWidth};
})()""".replace("MIN_CHARS", str(MIN_CHARS))
SLICE = 1400  # the height of one screenshot
REPLY_SECONDS = 60.0  # the longest wait for Chromium's reply to one command


def say(config: pytest.Config, line: str) -> None:
    """Print `line` on the terminal at once, whatever pytest captures."""
    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(line, file=sys.stderr, flush=True)


APT_SECONDS = 300  # an apt-get step that takes longer has no network to reach
CJK_FONT = "fonts-wqy-microhei"  # Debian's smallest font with Chinese glyphs (about 1.6 MB)


def apt_install(config: pytest.Config, package: str, why: str) -> str | None:
    """Install Debian's `package` with apt-get (an `apt-get update` first if that fails), saying
    `why` on the terminal; the reason when it cannot be, None when it is installed."""
    if shutil.which("apt-get") is None:
        return f"{package} is missing and this is not a Debian-like system (no apt-get)"
    if os.geteuid() != 0:
        return f"{package} is missing: install it with `sudo apt-get install {package}`"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Another test process (pytest-xdist's) may be installing too: wait for its lock.
    apt_get = ["apt-get", "-o", f"DPkg::Lock::Timeout={APT_SECONDS}"]
    install = [*apt_get, "install", "-y", "--no-install-recommends", package]
    say(config, f"\nInstalling Debian's {package} {why} (first run only)...")
    for before in ([], [[*apt_get, "update"]]):
        for command in [*before, install]:
            try:
                done = subprocess.run(command, env=env, capture_output=True, text=True,
                                      check=False, timeout=APT_SECONDS)  # fmt: skip
            except subprocess.TimeoutExpired:
                return f"`{' '.join(command)}` took over {APT_SECONDS} s (no network?)"
            if done.returncode != 0:
                break
        else:
            return None
    return f"`{' '.join(command)}` failed ({done.returncode}):\n{done.stdout}{done.stderr}"


def required(reason: str | None, what: str) -> None:
    """Skip the test for `reason` (fail it under CI, where a page must not pass unseen)."""
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"{what} must be tested in CI: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium(pytestconfig: pytest.Config) -> str:
    """The path of Debian's Chromium, installed first if need be."""
    if not Path(CHROMIUM).exists():
        reason = apt_install(pytestconfig, "chromium", "for the report page's tests")
        required(reason, "the report page")
    return CHROMIUM


def chinese_fonts() -> list[str]:
    """The font files fontconfig knows that cover Chinese (`fc-list :lang=zh`)."""
    if shutil.which("fc-list") is None:
        return []
    listed = subprocess.run(["fc-list", ":lang=zh", "file"], capture_output=True, text=True)
    return listed.stdout.split()


@pytest.fixture(scope="session")
def cjk_font(pytestconfig: pytest.Config) -> None:
    """A font with Chinese glyphs, so that a `--lang zh` page shows characters, not boxes:
    Debian's `CJK_FONT`, installed first if no such font is there."""
    if not chinese_fonts():
        reason = apt_install(pytestconfig, CJK_FONT, "for the Chinese pages' screenshots")
        required(reason, "the Chinese report page")


class Browser:
    """One headless Chromium, driven over the DevTools protocol on a pipe."""

    def __init__(self, binary: str, profile: Path, log: Path) -> None:
        commands, self.commands = os.pipe()  # we write, Chromium reads on its fd 3
        self.replies, replies = os.pipe()  # Chromium writes on its fd 4, we read

        def on_fds_3_and_4() -> None:  # in the child: above 4 first, so neither end is clobbered
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (commands, replies)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        with log.open("wb") as stderr:
            self.process = subprocess.Popen(
                [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                pass_fds=(3, 4),
                preexec_fn=on_fds_3_and_4,  # safe: nothing else runs threads here
            )
        os.close(commands)
        os.close(replies)
        self.log = log
        self.buffer = b""
        self.events: list[dict] = []
        self.last_id = 0

    def send(self, method: str, session: str | None = None, **params: object) -> dict:
        """Run one command and return its result; the events that came first are kept."""
        self.last_id += 1
        message = {"id": self.last_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.receive(method)
            if reply.get("id") == self.last_id:
                if "error" in reply:
                    raise RuntimeError(f"Chromium refused {method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, event: str, session: str) -> None:
        """Wait until `event` has come for `session` (it may have come already)."""
        while not any(
            message.get("method") == event and message.get("sessionId") == session
            for message in self.events
        ):
            self.events.append(self.receive(event))

    def receive(self, waiting_for: str) -> dict:
        while b"\0" not in self.buffer:
            ready, _, _ = select.select([self.replies], [], [], REPLY_SECONDS)
            chunk = os.read(self.replies, 1 << 16) if ready else b""
            if not chunk:
                raise RuntimeError(
                    f"Chromium sent nothing for {REPLY_SECONDS:.0f} s (waiting for {waiting_for}), "
                    f"or exited ({self.process.poll()}); its log:\n{self.log.read_text()[-3000:]}"
                )
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)

    def close(self) -> None:
        os.close(self.commands)  # Chromium exits when its pipe closes
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.replies)


@pytest.fixture(scope="session")
def browser(
    chromium: str, cjk_font: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Browser]:
    """One Chromium for the session, started once a Chinese font is there (it reads the system's
    fonts when it starts)."""
    folder = tmp_path_factory.mktemp("chromium")
    started = Browser(chromium, folder / "profile", folder / "chromium.log")
    yield started
    started.close()


def pdf_pages(path: Path) -> int:
    """The number of pages of the PDF at `path`."""
    return len(PDF_PAGE.findall(path.read_bytes()))


class Tab:
    """A page open in the browser, its console errors, and what it shows."""

    def __init__(self, browser: Browser, page: Path, width: int = WIDTH) -> None:
        self.browser = browser
        self.width = width
        self.target = browser.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = browser.send("Target.attachToTarget", targetId=self.target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.window(width)
        self.send("Page.navigate", url=page.resolve().as_uri())
        browser.wait_for("Page.loadEventFired", self.session)

    def send(self, method: str, **params: object) -> dict:
        return self.browser.send(method, self.session, **params)

    def console_errors(self) -> list[str]:
        """Errors the page logged: console calls, uncaught exceptions, failed loads, refusals."""
        errors = []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                continue
            params = event.get("params", {})
            if event["method"] == "Runtime.consoleAPICalled" and params["type"] in (
                "error",
                "assert",
            ):
                errors.append(" ".join(str(arg.get("value", arg)) for arg in params["args"]))
            elif event["method"] == "Runtime.exceptionThrown":
                errors.append(params["exceptionDetails"]["text"])
            elif event["method"] == "Log.entryAdded" and params["entry"]["level"] == "error":
                errors.append(params["entry"]["text"])
        return errors

    def evaluate(self, expression: str) -> object:
        """The JSON value of `expression`, evaluated in the page (the page itself has no script)."""
        reply = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression} raised: {reply['exceptionDetails']}")
        return reply["result"]["value"]

    def layout(self) -> dict:
        """What `LAYOUT` finds, every folded section unfolded first (a reader opens them):
        `{"narrow": [a line per box], "overflow": px past the window's right edge}`."""
        self.evaluate("[...document.querySelectorAll('details')].map((el) => (el.open = 1)).length")
        return self.evaluate(LAYOUT)

    def printed_layout(self) -> dict:
        """`layout` as the page is printed on A4 (turned sideways where its style says so: a page
        of class "wide"), with `clipped`: the boxes whose content is wider than they are, which
        paper cannot scroll. The window is as it was afterwards."""
        sideways = self.evaluate("document.body.classList.contains('wide')")
        width = (A4_INCHES[1 if sideways else 0] - 2 * PRINT_MARGIN_INCHES) * CSS_PX_PER_INCH
        self.send("Emulation.setEmulatedMedia", media="print")
        self.window(round(width))
        try:
            found = self.layout()
            found["clipped"] = self.evaluate(CLIPPED)
            return found
        finally:
            self.send("Emulation.setEmulatedMedia", media="")
            self.window(self.width)

    def window(self, width: int) -> None:
        """Lay the page out in a window `width` CSS px wide, `HEIGHT` high."""
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=HEIGHT,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip

    def bottom(self, selector: str) -> float:
        """How far down the page the first element matching `selector` ends, in CSS px."""
        return self.evaluate(f"document.querySelector({json.dumps(selector)})"
                             ".getBoundingClientRect().bottom + window.scrollY")  # fmt: skip

    def pdf(self, path: Path) -> int:
        """Print the page on A4 into `path`, as a person printing it would (on the page's own
        paper size where its style sets one: A4 turned sideways); its page count."""
        width, height = A4_INCHES
        printed = self.send("Page.printToPDF", paperWidth=width, paperHeight=height,
                            preferCSSPageSize=True)  # fmt: skip
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(printed["data"]))
        return pdf_pages(path)

    def fonts(self, selector: str) -> dict[str, int]:
        """The fonts the browser drew the text of the first element matching `selector` with:
        `{family: glyphs}` (DevTools' `CSS.getPlatformFontsForNode`)."""
        self.send("DOM.enable")
        self.send("CSS.enable")
        root = self.send("DOM.getDocument")["root"]["nodeId"]
        node = self.send("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
        assert node, f"the page has no {selector}"
        fonts = self.send("CSS.getPlatformFontsForNode", nodeId=node)["fonts"]
        return {font["familyName"]: font["glyphCount"] for font in fonts}

    def screenshots(self, stem: str) -> list[Path]:
        """The whole page, not only the window, as PNGs of at most `SLICE` pixels' height each,
        which an image viewer shows without shrinking the text away."""
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        paths = []
        for index, top in enumerate(range(0, math.ceil(size["height"]), SLICE), 1):
            height = min(SLICE, size["height"] - top)
            clip = {"x": 0, "y": top, "width": size["width"], "height": height, "scale": 1}
            shot = self.send(
                "Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip
            )
            paths.append(ARTIFACTS / f"{stem}-{index}.png")
            paths[-1].write_bytes(base64.b64decode(shot["data"]))
        return paths

    def close(self) -> None:
        self.browser.send("Target.closeTarget", targetId=self.target)
