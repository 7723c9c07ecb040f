"""The zoos' documented defaults into the database (``netsurvey testbed zoo-record``).

The testbed's server zoos (testbed/zoo.py, zoo2.py, zoo_dns.py, zoo_quic.py) carry, per
server and fact, the implementation's documented default with its citation. ``plot
zoo-table`` compares netsurvey's measurements with them; analysis reads only the database,
so this package writes them to ``zoo_documented_default`` (schema/0180). It scans nothing:
it is the zoo's writing side, kept outside testbed/ because the testbed's code is the
fingerprint its running instance is built from (a change there rebuilds the shared testbed).
"""
