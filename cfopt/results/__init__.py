"""What a query returns.

* :mod:`.counterfactual` — :class:`Counterfactual` (one query) and
  :class:`CounterfactualSet` (a diverse set);
* :mod:`.robust` — the robust methods' answers, verdicts and certificates;
* :mod:`.status` — :class:`Status`, the outcome of a query;
* :mod:`.serialize` — JSON-safe values of the results' fields.
"""
