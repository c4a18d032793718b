#!/usr/bin/env python3
"""GET /docs in a real browser: headless Chromium (Debian's chromium + chromium-driver) via Selenium.

Usage: docs_browser_test.py PETAL_BIN OUT_DIR. Starts `petal serve` (CPU engine, MiniLM) with
--api-key, loads /docs and checks: every path of /openapi.json is listed on the page; "Try it out"
-> Execute on POST /v1/embeddings answers 401 before the key is entered and 200 after
"Authorize"; the browser logged no Content-Security-Policy violation (so nothing came from
another origin or ran inline). Keeps OUT_DIR/docs.png (the page after the 200) and
OUT_DIR/browser_console.txt. Exits 77 (CTest's skip) without selenium, chromium or the model.
"""
import json
import os
import shutil
import sys
import time
import urllib.request

from petal_proc import Checks, PetalServe, model_present, skip

KEY = "browser-test-key"


def main():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as EC
        from selenium.webdriver.support.ui import WebDriverWait
    except ImportError:
        return skip("selenium is not installed (scripts/requirements.txt)")
    chromium = shutil.which("chromium")
    driver_bin = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not chromium or not os.path.exists(driver_bin):
        return skip("chromium / chromium-driver (Debian packages) are not installed")
    if not model_present():
        return skip("the MiniLM model is missing")
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "."
    os.makedirs(out_dir, exist_ok=True)
    check = Checks()

    serve = PetalServe(sys.argv[1], ["--api-key", KEY])
    driver = None
    t0 = time.time()
    try:
        with urllib.request.urlopen(serve.base + "/openapi.json", timeout=10) as r:
            doc = json.loads(r.read())
        opts = webdriver.ChromeOptions()
        opts.binary_location = chromium
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--window-size=1280,2000", "--no-first-run", "--disable-extensions",
                  "--disable-background-networking", "--disable-component-update"):
            opts.add_argument(a)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
        wait = WebDriverWait(driver, 30)
        driver.get(serve.base + "/docs")
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, ".opblock")))
        shown = {e.get_attribute("data-path") for e in
                 driver.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
        for path in doc["paths"]:
            check(path in shown, "route %s is not listed on /docs (shown: %s)" % (path, sorted(shown)))
        print("listed on /docs: %d routes" % len(shown))

        block = driver.find_element(By.ID, "operations-embeddings-createEmbeddings")
        block.find_element(By.CSS_SELECTOR, ".opblock-summary-control").click()
        wait.until(lambda d: block.find_elements(By.CSS_SELECTOR, ".try-out__btn"))
        block.find_element(By.CSS_SELECTOR, ".try-out__btn").click()

        def execute():
            for old in block.find_elements(By.CSS_SELECTOR, ".btn-clear"):
                old.click()  # clear the previous answer so that the next one is this request's
            block.find_element(By.CSS_SELECTOR, ".execute").click()
            cell = wait.until(lambda d: block.find_elements(
                By.CSS_SELECTOR, ".live-responses-table .response .response-col_status"))
            return cell[0].text.strip().split()[0]

        status = execute()
        check(status == "401", "without the key: try-it-out answered %s, not 401" % status)
        # Authorize with the API key, as a user would.
        driver.find_element(By.CSS_SELECTOR, ".auth-wrapper .authorize").click()
        field = wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, ".auth-container input")))
        field.send_keys(KEY)
        driver.find_element(By.CSS_SELECTOR, ".auth-btn-wrapper .authorize").click()
        driver.find_element(By.CSS_SELECTOR, ".auth-btn-wrapper .btn-done").click()
        status = execute()
        check(status == "200", "after Authorize: try-it-out answered %s, not 200" % status)
        body = block.find_element(By.CSS_SELECTOR, ".live-responses-table .response .response-col_description").text
        check('"embedding"' in body, "the 200 answer shows no embedding: %r" % body[:200])
        driver.execute_script("arguments[0].scrollIntoView()", block)
        driver.save_screenshot(os.path.join(out_dir, "docs.png"))
        logs = driver.get_log("browser")
        with open(os.path.join(out_dir, "browser_console.txt"), "w") as f:
            for entry in logs:
                f.write("%s %s\n" % (entry["level"], entry["message"]))
        csp = [e["message"] for e in logs if "Content Security Policy" in e["message"]]
        check(not csp, "CSP violations: %s" % csp[:3])
        print("screenshot: %s (%.1f s)" % (os.path.join(out_dir, "docs.png"), time.time() - t0))
    finally:
        if driver is not None:
            driver.quit()
        code = serve.stop()
    return check.finish(code)


if __name__ == "__main__":
    sys.exit(main())
