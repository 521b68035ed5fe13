"""Voice notes, photos and documents sent in chat (docs/media.md).

The channels only describe what a message carried (``bruce.channel.Attachment``); this package
decides what is done with it, inside the message's turn: ``rules`` refuses what will not be read
before anything is fetched, ``intake`` fetches what will be used through the message's channel and
turns each attachment into text for the history (``audio``: a transcript; ``documents``: the text;
``images``: a placeholder, and the picture itself for the model in that one turn), ``keep`` keeps
the photos under the data folder for ``media.keep_days``.
"""
