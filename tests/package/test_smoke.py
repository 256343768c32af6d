import evalmix


def test_version_and_lazy_names():
    assert evalmix.__version__
    assert "read" in dir(evalmix)
