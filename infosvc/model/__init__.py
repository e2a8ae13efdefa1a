"""The object model: plain dataclasses named in the specifications' own words.

The model knows nothing of XML, JSON or HTTP; infosvc.codec translates it.
"""
