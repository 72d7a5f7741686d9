"""Three os-ken controller applications that share the switches' flow tables: `router`
(the routes of a rule file), `acl` (its filter lines) and `lb` (a load balancer's more
specific rules). Run any of them together with `python -m examples.apps.run`."""
