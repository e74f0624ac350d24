"""HTTP only: the aiohttp app, its routes, auth and CORS. No audio here."""
