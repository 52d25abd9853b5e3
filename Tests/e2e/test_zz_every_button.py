"""#56: every button a page shows is pressed by a browser test. Collected last (its name), it
compares the buttons of Public/*.html with those the browser tests pressed in this run
(`conftest.PRESSED`, recorded by every `WebElement.click`)."""
import glob
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from conftest import PRESSED, ROOT  # noqa: E402


def page_buttons():
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "Public", "*.html"))):
        for match in re.finditer(r'<button[^>]*\bid="([^"]+)"', open(path).read()):
            found.setdefault(match.group(1), os.path.basename(path))
    return found


def test_every_button_of_every_page_is_pressed_by_a_browser_test(request):
    everything = [item for item in request.session.items if item.nodeid != request.node.nodeid]
    if len({item.fspath.basename for item in everything}) < len(glob.glob(os.path.join(os.path.dirname(__file__), "test_*.py"))) - 1:
        pytest.skip("only with the whole browser suite (this run selected part of it)")
    buttons = page_buttons()
    unpressed = sorted(f"{page}#{button}" for button, page in buttons.items() if button not in PRESSED)
    assert not unpressed, "buttons no browser test presses: " + ", ".join(unpressed)
