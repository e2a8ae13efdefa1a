"""Codecs: translate the object model to and from XML and JSON renderings."""
