"""Packaging for python_dynamodb_lock."""
import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
VERSION = re.search(
    r"^__version__ = '([^']+)'",
    (HERE / 'python_dynamodb_lock' / '_version.py').read_text(),
    re.M,
).group(1)

# What moto's server (moto.moto_server.werkzeug_app) imports besides moto itself; the same
# exclusions as moto's own 'server' extra.
AIOBOTOCORE = 'aiobotocore>=2.13'
MOTO_SERVER = ['flask!=2.2.0,!=2.2.1', 'flask-cors']

setup(
    name='python_dynamodb_lock',
    version=VERSION,
    description='A distributed lock on Amazon DynamoDB: a drop-in, corrected python_dynamodb_lock',
    long_description=(HERE / 'README.rst').read_text(encoding='utf-8'),
    long_description_content_type='text/x-rst',
    license_expression='Apache-2.0',  # PEP 639 (hence setuptools>=77 in pyproject.toml)
    license_files=['LICENSE'],
    packages=find_packages(include=['python_dynamodb_lock', 'python_dynamodb_lock.*']),
    package_data={'python_dynamodb_lock': ['py.typed', '_launcher/*.java']},
    python_requires='>=3.9',
    install_requires=['boto3>=1.26', 'botocore>=1.29'],
    extras_require={
        # The demo's fallback engine is moto's DynamoDB behind moto's WSGI app
        # (python_dynamodb_lock._embedded.start_moto_server), which imports flask and flask_cors;
        # werkzeug comes with moto. Not moto[server]: that is every AWS service's dependencies
        # (about 60 packages instead of about 25).
        'demo': ['moto>=5.0', *MOTO_SERVER],
        # python_dynamodb_lock.testing and its pytest plugin (fixtures dynamodb_lock_*), for
        # testing code that uses locks: moto in-process and the moto server as engines.
        'testing': ['pytest>=7', 'moto[dynamodb]>=5.0', *MOTO_SERVER],
        # moto[dynamodb] adds py-partiql-parser, for the batched heartbeats on moto in-process.
        # prometheus_client: for the test of examples/prometheus_metrics.py. pytest-xdist: tox runs
        # the suite on every core (-n auto).
        'test': ['pytest>=7', 'moto[dynamodb]>=5.0', *MOTO_SERVER, 'hypothesis>=6.100', AIOBOTOCORE,
                 'prometheus_client>=0.17', 'pytest-xdist>=3.5'],
        'docs': ['sphinx>=7'],
        'lint': ['ruff>=0.5'],
        # AsyncDynamoDBLockClient (python_dynamodb_lock.aio) runs on aiobotocore; pip picks the
        # release that fits the installed botocore (and, on 3.9, the last one supporting it).
        'asyncio': [AIOBOTOCORE],
    },
    entry_points={
        'console_scripts': ['dynamodb-lock=python_dynamodb_lock.__main__:main'],
        # Loaded by pytest; it defines its fixtures only when the testing extra is installed.
        'pytest11': ['python_dynamodb_lock = python_dynamodb_lock.testing.pytest_plugin'],
    },
    classifiers=[
        'Development Status :: 4 - Beta',
        'Intended Audience :: Developers',
        'Programming Language :: Python :: 3',
        'Programming Language :: Python :: 3 :: Only',
        'Programming Language :: Python :: 3.9',
        'Programming Language :: Python :: 3.10',
        'Programming Language :: Python :: 3.11',
        'Programming Language :: Python :: 3.12',
        'Programming Language :: Python :: 3.13',
        'Programming Language :: Python :: Implementation :: CPython',
        'Typing :: Typed',
    ],
    zip_safe=False,
)
