"""The read-only web view: the topology drawn on the server (layout, svg), the API's
answers the page needs beyond the existing ones (data: topology, coverage), and the HTTP
server on its own loopback listener (server; `ui.enabled`, `ui.listen` in pazzd.yaml).
The page's script and style are in static/, shipped as package data: nothing is fetched
from outside. docs/ui.md describes the views."""
