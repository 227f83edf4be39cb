"""The demo en→zh model: its training (`models.demo.train`) and evaluation
(`models.demo.evaluate`); beside them, its checkpoint and its committed bundle."""
