"""The fleet's dashboard: a Starlette app over the fleet's files (``app.make_app``), its JSON
API (``api``, read by ``views`` through a row cache, ``rows``), the page (``static/``, served
from the package) and the Uvicorn server ``cairn fleet start --port`` and ``cairn fleet
dashboard`` run (``serve``)."""
