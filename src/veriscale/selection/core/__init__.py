"""Selection's pure core: schedules, tournaments, adaptive stopping, Bradley–Terry and the judge
ledger, with no model calls (see ``veriscale.selection``)."""
