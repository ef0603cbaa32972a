"""Batches of counterfactual queries.

* :mod:`.runner` — serially, in parallel processes or on a Dask cluster (:class:`BatchResult`);
* :mod:`.journal` — a batch's answers on disk, one JSON line each, so it can be resumed.
"""
