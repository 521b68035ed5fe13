"""The Telegram channel. Importing the package defers aiogram's types (``deferred_types``)."""

from channels.telegram.deferred_types import install

install()
