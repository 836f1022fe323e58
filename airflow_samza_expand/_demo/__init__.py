"""``samza-expand demo``: the expansion under live keyed traffic on an embedded stack (see
`_demo.cli`). The top of the house: nothing in the package imports it."""
