"""A folder of the demo page (``GET /static/``, ``/static/js/``) was aiohttp's 403 ``Forbidden``
(code ``http_error``): it is no file, so now a 404 ``not_found`` in the API's JSON error shape,
like any other path that is not there; the files themselves are served as before."""

from __future__ import annotations

import aiohttp

from tests.helpers import serve


async def test_a_folder_of_the_demo_page_is_not_found(models, gateway_config):
    async with serve(gateway_config(), models) as (url, _app), aiohttp.ClientSession() as http:
        for path in ("/static/", "/static", "/static/js/"):
            async with http.get(f"{url}{path}") as response:
                assert response.status == 404, (path, response.status)
                assert (await response.json())["error"]["code"] == "not_found"
        async with http.get(f"{url}/static/index.html") as response:
            assert response.status == 200 and "html" in response.content_type
